// Which HotSpot stubs call into the VM, known by the names HotSpot gives them (JDK 17 and 25):
// the decoder's return-address checks and the oracle comparison both ask.
#pragma once

#include "stackfrag/events/events.hpp"

namespace sf::detail {

// HotSpot's Runtime1 and OptoRuntime stubs, the runtime blobs, the GC barriers' slow paths: no Java
// method is called from them and compiled code calls them for no Java callee. HotSpot's
// frame::safe_for_sender fails on their frames (RuntimeStubs made frame_never_safe, singleton blobs,
// StubRoutines code without a frame size), so AsyncGetCallTrace's walk ends at such a frame.
bool calls_into_vm(const Stub* stub);

// The stubs a virtual thread's bottom thawed frame returns to (JDK 21+: lazy thawing patches that
// frame's return address). Their caller is Continuation.enterSpecial (CodeMap::continuation_return_pc).
bool is_continuation_return_barrier(const Stub* stub);
// The stub Continuation.enterSpecial calls to thaw a continuation's frames: the call returns to
// ContinuationEntry's return pc, the return barrier's caller.
bool is_continuation_thaw(const std::string& stub_name);

// The stubs the foreign function API makes for `Linker.upcallStub` (JDK 22+): native code calls them,
// they call a Java method. Each begins with `enter` and is announced without a frame size.
bool is_upcall_stub(const Stub* stub);

// StubRoutines::call_stub, through which the VM calls Java (JavaCalls::call_helper): it begins with
// `enter`; its return address into Java code is VmInfo::call_stub_return.
bool is_call_stub(const Stub* stub);

// An AdapterBlob, one per argument signature: it begins with that signature's i2c adapter
// (interpreter or call stub -> compiled code). Those made before JVMTI starts are named
// "I2C/C2I adapters"; a later one's name adds its signature's fingerprint, "I2C/C2I adapters(0x…)"
// (about a third of a run's adapters, JDK 17 and 25).
bool is_adapter_blob(const Stub* stub);

// The stubs that begin with `enter` (push rbp; mov rbp, rsp): C1's Runtime1 stubs that have a frame
// size (they save registers with an oop map; those without one, slow_subtype_check, only push), and
// the collectors' C1 runtime stubs (G1's g1_*_barrier_slow, ZGC's load_barrier_on_*_runtime_stub and
// store_barrier_on_oop_field_*, Shenandoah's shenandoah_*_slow), which the VM announces without a
// frame size (they save registers without an oop map), and StubRoutines' array copies (all but
// generic_arraycopy, whose `enter` follows a jump). The runtime blobs and C2's runtime stubs leave
// rbp as compiled code had it.
bool builds_rbp_frame(const Stub* stub);

// HotSpot's nmethod entry barrier stub, which a compiled method's prologue calls: `push -1` (a
// cookie), `enter`, every register saved (hs::entry_barrier).
bool is_method_entry_barrier(const Stub* stub);

// C1's Runtime1 stub that its methods' exception handler entries call (JDK 17:
// "handle_exception_from_callee Runtime1 stub", JDK 25: "C1 Runtime handle_exception_from_callee_blob").
bool is_c1_exception_search(const Stub* stub);

// The blobs that replace a deoptimized compiled frame by interpreter frames: they push them as
// skeletons and call Deoptimization::unpack_frames from a frame of their own, which returns into
// the interpreter.
bool unpacks_frames(const Stub* stub);

}  // namespace sf::detail

// HotSpot's names for its own threads, as /proc shows them (15 bytes): the kind and the root frame.
#include <catch2/catch.hpp>

#include "stackfrag/hotspot/thread_names.hpp"

using namespace sf;
using sf::hotspot::native_thread_kind;
using sf::hotspot::native_thread_root;

TEST_CASE("the VM's thread names map to their kind, and to one root per pool with numbers dropped") {
    CHECK(native_thread_kind("GC Thread#0") == ThreadKind::kGc);
    CHECK(native_thread_kind("G1 Conc#0") == ThreadKind::kGc);
    CHECK(native_thread_kind("G1 Refine#1") == ThreadKind::kGc);
    CHECK(native_thread_kind("ZWorkerYoung#0") == ThreadKind::kGc);
    CHECK(native_thread_kind("C2 CompilerThre") == ThreadKind::kCompiler);
    CHECK(native_thread_kind("C1 CompilerThre") == ThreadKind::kCompiler);
    CHECK(native_thread_kind("VM Thread") == ThreadKind::kVm);
    CHECK(native_thread_kind("VM Periodic Tas") == ThreadKind::kVm);
    CHECK(native_thread_kind("Service Thread") == ThreadKind::kVm);
    CHECK(native_thread_kind("java") == ThreadKind::kOther);
    CHECK(native_thread_kind("Zeta") == ThreadKind::kOther);   // not ZGC: no capital after the Z
    CHECK(native_thread_kind("stackfrag-live") == ThreadKind::kProfiler);
    CHECK(native_thread_kind("stackfrag-read") == ThreadKind::kProfiler);
    CHECK(native_thread_kind("stackfrag") == ThreadKind::kOther);   // an application's thread of that name

    CHECK(native_thread_root("GC Thread#12") == "[GC Thread]");
    CHECK(native_thread_root("GC Thread#0") == native_thread_root("GC Thread#1"));
    CHECK(native_thread_root("G1 Conc#0") == "[G1 Conc]");
    CHECK(native_thread_root("C2 CompilerThre") == "[C2 CompilerThread]");
    CHECK(native_thread_root("C1 CompilerThre") == "[C1 CompilerThread]");
    CHECK(native_thread_root("VM Periodic Tas") == "[VM Periodic Task Thread]");
    CHECK(native_thread_root("VM Thread") == "[VM Thread]");
    CHECK(native_thread_root("worker-7") == "[worker]");
    CHECK(native_thread_root("java") == "[java]");
    CHECK(native_thread_root("") == "[native thread]");
    CHECK(native_thread_root("42") == "[42]");   // nothing but digits: kept
}

// The fuzzer's own entry, compiled into the test so that the replay runs exactly what was fuzzed.
#include "../../fuzz/fuzz_entry_recording.cpp"

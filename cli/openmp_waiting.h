// How the CPU backend's OpenMP threads wait for each other. GNU OpenMP (and OpenBLAS's
// OpenMP build through it) lets a thread that reaches the end of a parallel region early
// spin for about 300,000 turns before it sleeps. Beside anything else (another run, a
// compiler, a dashboard) the spinning thread holds the core its partner needs to finish, and
// every op of the step waits out a time slice: two runs on 2 cores each trained about 5 times
// slower than alone. Sleeping at once (OMP_WAIT_POLICY=passive) fixes that but costs a run
// alone about 10% in wake-ups; a short spin of 10,000 turns keeps both (bench/README.md,
// several runs on one machine).
#pragma once

namespace kiln {

// The spin kiln's OpenMP threads take before they sleep, unless the user chose.
inline constexpr const char* kOpenMpSpinCount = "10000";

// libgomp reads its settings when it loads, before main: so unless the user chose a policy
// (OMP_WAIT_POLICY or GOMP_SPINCOUNT), kiln executes itself once more with
// GOMP_SPINCOUNT=kOpenMpSpinCount. If that fails it carries on with the library's default.
void exec_with_short_openmp_spins(char** argv);

}  // namespace kiln

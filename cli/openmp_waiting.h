// How the CPU backend's OpenMP threads wait for each other. GNU OpenMP (and OpenBLAS's
// OpenMP build through it) lets a thread that reaches the end of a parallel region early
// spin for about 300,000 turns before it sleeps. Alone on a machine that saves a wake-up;
// beside anything else (another run, a compiler, a dashboard) the spinning thread holds the
// core its partner needs to finish, and every op of the step waits out a time slice: a run
// on 2 cores beside a niced build trained 6 times slower than with passive waits
// (bench/README.md, several runs on one machine).
#pragma once

namespace kiln {

// libgomp reads its settings when it loads, before main: so unless the user chose a policy
// (OMP_WAIT_POLICY or GOMP_SPINCOUNT), kiln executes itself once more with
// OMP_WAIT_POLICY=passive. If that fails it carries on with the library's default.
void exec_with_passive_openmp_waits(char** argv);

}  // namespace kiln

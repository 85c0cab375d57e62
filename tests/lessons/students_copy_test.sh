#!/usr/bin/env bash
# The students' copy builds: make it (lessons/exercises/make_students_copy.sh) in WORK, check
# that no answer went into it, configure it, and build what a student builds for the exercises:
# their C++ skeletons with the checker, and where nvcc exists their CUDA skeletons in the plugin
# (flashlab_student pulls it in). The targets that need the answers must be gone.
#
#   students_copy_test.sh SOURCE_ROOT WORK
set -euo pipefail

root=$1
work=$2
rm -rf "$work"
"$root/lessons/exercises/make_students_copy.sh" "$work/src"

for answer in lessons/exercises/solutions tests/lessons/wrong_solutions; do
  if [[ -e $work/src/$answer ]]; then
    echo "FAIL: $answer is in the students' copy" >&2
    exit 1
  fi
done
for skeleton in ex21_scalar_update.cu ex22_pipelined_loop.cu ex23_combine.cu ex02_merge.cpp; do
  if [[ ! -f $work/src/lessons/exercises/student/$skeleton ]]; then
    echo "FAIL: the skeleton $skeleton is missing from the students' copy" >&2
    exit 1
  fi
done

# The build folder sits inside the copy, as build/ sits in the repository, so that the compile
# commands read the same relative to it and a compiler cache (ccache with CCACHE_BASEDIR) can
# serve them: without one, this test compiles the CPU reference afresh (many minutes on 2 cores).
build=$work/src/build
cmake -S "$work/src" -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release > "$work/configure.log" 2>&1 ||
  { tail -30 "$work/configure.log"; echo "FAIL: the students' copy does not configure" >&2; exit 1; }
targets=$(cmake --build "$build" --target help)
for gone in flashlab_exercise_solutions flashlab_exercise_solution_kernels flashlab_exercise_wrong \
            test_exercises_solutions test_exercises_wrong; do
  if grep -q "^$gone:" <<< "$targets"; then
    echo "FAIL: the students' copy still has the target $gone" >&2
    exit 1
  fi
done
cmake --build "$build" -j 2 --target flashlab_student > "$work/build.log" 2>&1 ||
  { tail -30 "$work/build.log"; echo "FAIL: the students' skeletons do not build" >&2; exit 1; }
if grep -q "^flashlab_student_kernels:" <<< "$targets"; then
  [[ -f $(find "$build" -name 'libflashlab_student_kernels.so' | head -1) ]] ||
    { echo "FAIL: the kernel skeletons' plugin was not built" >&2; exit 1; }
  echo "the students' copy builds, its CUDA skeletons included"
else
  echo "the students' copy builds (no nvcc here: its CUDA skeletons were not compiled)"
fi

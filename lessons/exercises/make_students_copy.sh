#!/usr/bin/env bash
# Makes the students' copy of flashlab: this repository's files (those git tracks, as they are
# in the working tree, and new ones it does not ignore) copied into DIR, without the answers:
# lessons/exercises/solutions (the solutions, the kernel exercises' included) and
# tests/lessons/wrong_solutions (the mistakes the checker is tested against: hints). DIR
# becomes a git repository of its own with one commit. The build leaves out whatever uses the
# two folders, so the copy builds and checks exactly the same.
#
#   lessons/exercises/make_students_copy.sh DIR      DIR must not exist yet, or be empty
set -euo pipefail

if [[ $# -ne 1 ]]; then
  echo "usage: $0 DIR (the students' copy is made there; DIR must not exist, or be empty)" >&2
  exit 2
fi
dest=$1
root=$(cd "$(dirname "$0")/../.." && pwd)
if [[ -e $dest && -n $(ls -A "$dest") ]]; then
  echo "$dest is not empty: give a new or empty folder for the students' copy" >&2
  exit 2
fi
mkdir -p "$dest"

answers=(lessons/exercises/solutions tests/lessons/wrong_solutions)
git -C "$root" ls-files -z --cached --others --exclude-standard |
  while IFS= read -r -d '' path; do
    for answer in "${answers[@]}"; do [[ $path == "$answer"/* ]] && continue 2; done
    [[ -e $root/$path ]] && printf '%s\0' "$path"  # a file deleted but not yet committed: skip
  done |
  tar -C "$root" --null -T - -cf - | tar -C "$dest" -xf -

git -C "$dest" init -q
git -C "$dest" add -A
git -C "$dest" -c user.name=flashlab -c user.email=flashlab@localhost commit -q -m "flashlab exercises for the class"
echo "the students' copy is in $dest: $(git -C "$dest" ls-files | wc -l) files, without ${answers[*]}"

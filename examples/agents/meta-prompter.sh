#!/bin/sh
# A stand-in meta-prompter (`--meta-prompter cmd:examples/agents/meta-prompter.sh`):
# it reads the meta-prompt (the guidance sections between their markers and
# the recent attempts), counts the recent compile failures, and keeps one
# pitfall about them up to date with one SEARCH/REPLACE block: added after
# the first line of the pitfalls section the first time, its count
# rewritten after that. A model does this with judgement; this script shows
# the mechanics without one.
prompt=$(cat)
failed=$(printf '%s\n' "$prompt" | grep -c '^- iter .*compile FAIL')
advice="- Declare every variable before use (the work-item index first, i = get_global_id(0)): ${failed} of the recent attempts failed to compile without it."
old=$(printf '%s\n' "$prompt" | grep -m 1 '^- Declare every variable before use')
echo "Diagnosis: ${failed} of the recent attempts did not compile, all for using the index before declaring it; the pitfalls should say so with the current count."
echo
echo '<<<<<<< SEARCH'
if [ -n "$old" ]; then
    printf '%s\n' "$old"
    echo '======='
    printf '%s\n' "$advice"
else
    first=$(printf '%s\n' "$prompt" | awk '/<!-- kevo:evolve pitfalls -->/ {getline; print; exit}')
    printf '%s\n' "$first"
    echo '======='
    printf '%s\n' "$first"
    printf '%s\n' "$advice"
fi
echo '>>>>>>> REPLACE'

#!/bin/sh
# A stand-in meta-prompter (`--meta-prompter cmd:examples/agents/meta-prompter.sh`):
# it reads the meta-prompt (the guidance sections between their markers and
# the recent attempts), counts the recent compile failures, and adds a
# pitfall about them after the first line of the pitfalls section, with one
# SEARCH/REPLACE block. A model does this with judgement; this script shows
# the mechanics without one.
prompt=$(cat)
failed=$(printf '%s\n' "$prompt" | grep -c '^- iter .*compile FAIL')
first=$(printf '%s\n' "$prompt" | awk '/<!-- kevo:evolve pitfalls -->/ {getline; print; exit}')
echo "Diagnosis: ${failed} of the recent attempts did not compile; the pitfalls say nothing about declaring the index before using it."
echo
echo '<<<<<<< SEARCH'
printf '%s\n' "$first"
echo '======='
printf '%s\n' "$first"
echo "- Declare every variable before use (the work-item index i = get_global_id(0) first): ${failed} recent attempts failed to compile without it."
echo '>>>>>>> REPLACE'

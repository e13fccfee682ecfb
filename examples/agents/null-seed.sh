#!/bin/sh
# The null proposer: answers every prompt with the seed kernel it is given
# (`cmd:examples/agents/null-seed.sh crates/tasks/assets/heat2d/seed.cl`),
# unchanged but for a first comment line that numbers the answer, so that
# no two answers are byte-identical and each is evaluated. A search driven
# by it cannot improve on the seed: the speedup it reports is the
# evaluator's noise plus whatever bias its choice of winner adds.
cat > /dev/null
case "$1" in
    *.cu) lang=cuda ;;
    *.py) lang=python ;;
    *) lang=opencl ;;
esac
echo "The seed, unchanged."
echo '```'"$lang"
case "$lang" in python) mark="#" ;; *) mark="//" ;; esac
echo "$mark answer $(date +%s%N)-$$"
cat "$1"
echo '```'

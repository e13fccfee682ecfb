#!/bin/sh
# The null proposer: answers every prompt with the seed kernel it is given
# (`cmd:examples/agents/null-seed.sh crates/tasks/assets/heat2d/seed.cl`),
# with one dead local variable of a fresh name after the first opening
# brace: the same kernel once compiled, but a different source each time,
# so no answer is taken for a duplicate of the seed and each is evaluated.
# A search driven by it cannot improve on the seed: the speedup it reports
# is the evaluator's noise plus whatever bias its choice of winner adds.
cat > /dev/null
case "$1" in
    *.cu) lang=cuda ;;
    *) lang=opencl ;;
esac
tag="null_answer_$(date +%s%N)_$$"
echo "The seed, unchanged."
echo '```'"$lang"
awk -v tag="$tag" '
    !done && /\{/ { print; print "    int " tag " = 0; (void)" tag ";"; done = 1; next }
    { print }
' "$1"
echo '```'

# GPU checks in one run (~9.5 minutes on an H200; BUD=30 for less): cold and warm decoding
# passes per precision (attention_profile.py), every decoding variant on CUDA against the CPU
# (identical lines, BLEU), mixed-precision training (bf16 for BUD seconds, fp16 with its gradient
# scaler), and bitwise determinism of CUDA training (same seed twice; resumed vs straight).
#   MODEL=checkpoint.pt bash benchmarks/gpu/checks.sh          (from the repository root)
#   DEV=cpu QUICK=1 MODEL=... bash benchmarks/gpu/checks.sh    (a dry run on 40 lines, on CPU)
#   TRAIN=0 MODEL=... bash benchmarks/gpu/checks.sh            (decoding only: ~4 minutes)
# MODEL: an inference checkpoint of the demo's vocabulary (mtkit average -c
# work/demo/en-de/demo-run/checkpoint_last.pt -o demo.pt); OUT: where logs are copied.
set -u
export PYTHONUNBUFFERED=1
DEV=${DEV:-cuda}; QUICK=${QUICK:-0}; PY=${PY:-python3}
O=${OUT:-/tmp/gpuout}; mkdir -p $O; W=/tmp/gw; rm -rf $W; mkdir -p $W
G=benchmarks/gpu; M=${MODEL:?MODEL=checkpoint.pt}
if [ -d .whl ]; then $PY -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl && export PYTHONPATH=/tmp/site; fi
export PYTHONPATH=$PWD:${PYTHONPATH:-}
MT="$PY -m mtkit"
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv 2>/dev/null
$PY -c "import torch;print('torch', torch.__version__, 'cuda', torch.cuda.is_available() and torch.cuda.get_device_name())"
lscpu | grep -E "Model name|^CPU\(s\)"
for s in test_2016_flickr val train; do for l in en de; do gunzip -c recipes/multi30k/data/$s.$l.gz > $W/$s.$l; done; done
N=1000; [ $QUICK = 1 ] && N=40 && head -40 $W/test_2016_flickr.en > $W/t && mv $W/t $W/test_2016_flickr.en && head -40 $W/test_2016_flickr.de > $W/t && mv $W/t $W/test_2016_flickr.de
T=$W/test_2016_flickr.en; R=$W/test_2016_flickr.de
head -300 $T > $W/v.en; V=$W/v.en
xl() { # xl NAME DEVICE ARGS...: translate the test set (IN: another input), time it
  local name=$1 dev=$2; shift 2
  local t0=$(date +%s.%N)
  $MT translate -m $M -i ${IN:-$T} -o $W/$name.hyp --device $dev --quiet "$@" 2>$W/$name.err; local rc=$?
  local t1=$(date +%s.%N)
  printf "%-22s rc %s  %6.1f s  %s\n" $name $rc $(awk "BEGIN{print $t1 - $t0}") "$(head -c 300 $W/$name.err | tr '\n' ' ')"
}
bleu() { $MT evaluate -i $W/$1.hyp -r $R --metrics bleu 2>&1 | grep -i bleu | head -1 | sed "s/^/$1 /"; }
echo "== cold and warm passes in one process (fp32, bf16, fp16; 300 lines)"
$PY $G/attention_profile.py $M $V $DEV 2>&1 | grep "pass"
echo "== decoding: $N test lines, CPU (device machine, all cores) against $DEV"
xl cpu-fp32 cpu; xl cpu-greedy cpu --beam 1
xl gpu-fp32 $DEV; xl gpu-fp32-big $DEV --max-tokens 16384
xl gpu-bf16 $DEV --dtype bf16; xl gpu-fp16 $DEV --dtype fp16
xl gpu-greedy $DEV --beam 1
IN=$V xl gpu-nbest $DEV --nbest 3
IN=$V xl gpu-sample1 $DEV --sampling --seed 3; IN=$V xl gpu-sample2 $DEV --sampling --seed 3
IN=$V xl gpu-ensemble $DEV -m $M
IN=$V xl cpu-draft cpu --beam 1 --draft $M; IN=$V xl gpu-draft $DEV --beam 1 --draft $M
IN=$V xl cpu-align cpu --alignment; IN=$V xl gpu-align $DEV --alignment
IN=$V xl cpu-scores cpu --word-scores; IN=$V xl gpu-scores $DEV --word-scores
IN=$V xl gpu-int8 $DEV --quantize int8; IN=$V xl gpu-compile $DEV --compile
paste $V <(head -300 $R | cut -d' ' -f2-3) > $W/cons.en
IN=$W/cons.en xl cpu-cons cpu --constraints; IN=$W/cons.en xl gpu-cons $DEV --constraints
printf 'dog\tHund\nman\tMann\n' > $W/gloss.tsv
xl cpu-gloss cpu --glossary $W/gloss.tsv; xl gpu-gloss $DEV --glossary $W/gloss.tsv
head -20 $T | paste -sd' ' | sed 's/^/<p>/; s/$/<\/p>/' | sed 's/ dog / <b>dog<\/b> /g' > $W/doc.html
IN=$W/doc.html xl cpu-html cpu --format html; IN=$W/doc.html xl gpu-html $DEV --format html
head -40 $T | paste -d' ' - - - - > $W/par.en
IN=$W/par.en xl cpu-split cpu --split-sentences; IN=$W/par.en xl gpu-split $DEV --split-sentences
S="$PY $G/same_lines.py"
$S $W/cpu-fp32.hyp $W/gpu-fp32.hyp gpu-fp32; $S $W/cpu-fp32.hyp $W/gpu-fp32-big.hyp gpu-fp32-big
$S $W/cpu-fp32.hyp $W/gpu-bf16.hyp gpu-bf16; $S $W/cpu-fp32.hyp $W/gpu-fp16.hyp gpu-fp16
$S $W/cpu-greedy.hyp $W/gpu-greedy.hyp gpu-greedy; IN=$V xl cpu-greedyv cpu --beam 1; IN=$V xl gpu-fp32v $DEV
$S $W/cpu-greedyv.hyp $W/gpu-draft.hyp gpu-draft
$S $W/cpu-greedyv.hyp $W/cpu-draft.hyp cpu-draft; $S $W/gpu-fp32v.hyp $W/gpu-ensemble.hyp gpu-ensemble
$S $W/gpu-sample1.hyp $W/gpu-sample2.hyp gpu-sample-again
for v in align scores cons gloss html split; do $S $W/cpu-$v.hyp $W/gpu-$v.hyp gpu-$v; done
for v in cpu-fp32 gpu-fp32 gpu-bf16 gpu-fp16 gpu-greedy; do bleu $v; done
cp $W/gpu-html.hyp $O/gpu.html; cp $W/cpu-html.hyp $O/cpu.html
[ "${TRAIN:-1}" = 0 ] && echo done && exit 0
echo "== training on $DEV"
$MT spm train --train $W/train --src-lang en --tgt-lang de --vocab-size 8000 --model-prefix $W/spm >/dev/null 2>&1
$MT prepare --src-lang en --tgt-lang de --spm $W/spm.model --train $W/train --valid $W/val --test $W/test_2016_flickr -o $W/data --force >/dev/null 2>&1; echo prepare rc $?
BUD=${BUD:-60}; [ $QUICK = 1 ] && BUD=10
trn() { local name=$1; shift; local t0=$(date +%s.%N)
  $MT train --config recipes/multi30k/demo.yaml --data $W/data --run-dir $W/$name --device $DEV "$@" > $W/$name.log 2>&1; local rc=$?
  printf "%-14s rc %s %6.1f s | %s\n" $name $rc $(awk "BEGIN{print $(date +%s.%N) - $t0}") "$(grep -v '^\s*$' $W/$name.log | tail -2 | tr '\n' ' ' | head -c 400)"; }
trn bf16 --precision bf16 --max-time $BUD
M=$W/bf16/checkpoint_last.pt xl bf16-test $DEV; bleu bf16-test; tail -3 $W/bf16/metrics.jsonl | head -c 600; echo
cp $W/bf16/metrics.jsonl $O/bf16-metrics.jsonl; cp $W/bf16.log $O/bf16.log
trn fp16 --precision fp16 --max-updates 100 --max-time 0
for p in bf16 fp32; do
  trn $p-a --precision $p --max-updates 60 --max-time 0 --set save_every=30 --set keep_last=0
  trn $p-b --precision $p --max-updates 30 --max-time 0 --set save_every=30 --set keep_last=0
  trn $p-b --precision $p --max-updates 60 --max-time 0 --set save_every=30 --set keep_last=0
  trn $p-c --precision $p --max-updates 60 --max-time 0 --set save_every=30 --set keep_last=0
  $PY $G/compare_weights.py $W/$p-a/checkpoint_last.pt $W/$p-c/checkpoint_last.pt "$p same seed twice"
  $PY $G/compare_weights.py $W/$p-a/checkpoint_last.pt $W/$p-b/checkpoint_last.pt "$p resumed at 30 vs straight"
done
$PY $G/compare_weights.py $W/fp32-a/checkpoint_last.pt $W/bf16-a/checkpoint_last.pt "fp32 vs bf16 (must differ)"
tail -5 $W/fp16.log
echo done

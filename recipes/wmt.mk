# Shared body of the WMT recipes: each recipe's Makefile sets its pair, then includes this file.
# Data comes through HF `datasets` (a hub dataset stored as parquet), the test set through
# `sacrebleu -t TEST_SET --echo src/ref`. To run offline, point DATASET at a local parquet/json
# file or saved dataset in the `translation` schema and TEST_SRC/TEST_REF at local files (the
# tests do exactly that).
MTKIT ?= mtkit
SACREBLEU ?= sacrebleu
WORK ?= $(RECIPE)/work
VOCAB ?= 32000
EXP := $(WORK)/$(SRC)-$(TGT)
TRAIN ?= $(DATASET)
VALID ?= $(DATASET)
TEST_SRC ?= $(WORK)/test.$(SRC)
TEST_REF ?= $(WORK)/test.$(TGT)
SPM_SAMPLE ?= 10000000
CONFIG ?= $(RECIPE)/config-base.yaml
GPUS ?= $(shell nvidia-smi -L 2>/dev/null | wc -l)
NODES ?= 1
AVG ?= 10
BEAM ?= 4
LENPEN ?= 0.6
CKPT ?= $(EXP)/run/checkpoint_avg.pt
TRAIN_ARGS ?=
# torchrun on every visible GPU; a plain process where there is none (CPU or one GPU).
LAUNCH := $(if $(filter-out 0 1,$(GPUS)),torchrun --nnodes $(NODES) --nproc_per_node $(GPUS) -m mtkit,$(MTKIT))

.PHONY: all spm prepare testset train average translate evaluate clean

# The whole pipeline, stage after stage (train resumes a run that exists).
all:
	$(MAKE) -f $(RECIPE)/Makefile testset
	$(MAKE) -f $(RECIPE)/Makefile train
	$(MAKE) -f $(RECIPE)/Makefile average
	$(MAKE) -f $(RECIPE)/Makefile evaluate

# One joint BPE vocabulary for both languages (32k for en-de), trained on a sample.
spm: $(WORK)/spm.model
$(WORK)/spm.model:
	mkdir -p $(WORK)
	$(MTKIT) spm train --train $(TRAIN) --hf-config $(HF_CONFIG) --src-lang $(SRC) --tgt-lang $(TGT) \
		--vocab-size $(VOCAB) --input-sentence-size $(SPM_SAMPLE) --model-prefix $(WORK)/spm

# Cleaning: drop empty pairs, pairs over 250 pieces, length ratio over 1.5, exact duplicates.
prepare: $(EXP)/data/manifest.json
$(EXP)/data/manifest.json: $(WORK)/spm.model
	$(MTKIT) prepare --src-lang $(SRC) --tgt-lang $(TGT) --spm $(WORK)/spm.model \
		--train $(TRAIN) --valid $(VALID) --hf-config $(HF_CONFIG) \
		--max-tokens 250 --max-ratio 1.5 --dedup -o $(EXP)/data --force

testset: $(TEST_SRC) $(TEST_REF)
$(WORK)/test.$(SRC):
	mkdir -p $(WORK)
	$(SACREBLEU) -t $(TEST_SET) -l $(SRC)-$(TGT) --echo src > $@.tmp && mv $@.tmp $@
$(WORK)/test.$(TGT):
	mkdir -p $(WORK)
	$(SACREBLEU) -t $(TEST_SET) -l $(SRC)-$(TGT) --echo ref > $@.tmp && mv $@.tmp $@

train: $(EXP)/data/manifest.json
	$(LAUNCH) train --config $(CONFIG) --data $(EXP)/data --run-dir $(EXP)/run $(TRAIN_ARGS)

average:
	$(MTKIT) average --last $(AVG) $(EXP)/run -o $(EXP)/run/checkpoint_avg.pt

translate: $(TEST_SRC)
	$(MTKIT) translate -m $(CKPT) -i $(TEST_SRC) -o $(EXP)/test.hyp.$(TGT) \
		--beam $(BEAM) --lenpen $(LENPEN) --quiet

evaluate: translate $(TEST_REF)
	$(MTKIT) evaluate -i $(EXP)/test.hyp.$(TGT) -r $(TEST_REF) --metrics bleu,chrf,ter

clean:
	rm -rf $(WORK)

# hetero-cli: `make demo` runs the main job, `make test` runs every test. Both install first if needed.
PYTHON ?= python3
# `make FLAVOUR=cpu VENV=.venv-cpu test` keeps a second flavour beside the first (CI runs both)
VENV ?= .venv
PY := $(VENV)/bin/python
# The OpenVINO flavour of ONNX Runtime gives two real devices (OPENVINO and CPU) on x86-64; elsewhere the CPU one.
ARCH := $(shell uname -m)
ifeq ($(ARCH),x86_64)
FLAVOUR ?= openvino
else
FLAVOUR ?= cpu
endif
# One stamp per flavour: `make FLAVOUR=gpu test` after a plain `make test` installs the GPU flavour.
STAMP := $(VENV)/.installed-$(FLAVOUR)
BENCH_STAMP := $(VENV)/.installed-bench-$(FLAVOUR)
# The flavours' wheels all install the one onnxruntime module: the others go before this one comes in.
ORT_WHEELS := onnxruntime onnxruntime-openvino onnxruntime-gpu
WHEEL_cpu := onnxruntime
WHEEL_openvino := onnxruntime-openvino
WHEEL_gpu := onnxruntime-gpu
OTHER_WHEELS := $(filter-out $(WHEEL_$(FLAVOUR)),$(ORT_WHEELS))
# setuptools' notice on every editable install (folders named like the package) says nothing to a newcomer
QUIET_EDITABLE := PYTHONWARNINGS="ignore:Editable installation"

.PHONY: install demo test lint clean bench bench-gpu

install: $(STAMP)

$(STAMP): pyproject.toml
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	if $(PY) -m pip show --quiet $(OTHER_WHEELS) >/dev/null 2>&1; then \
		$(PY) -m pip uninstall --quiet --yes $(ORT_WHEELS); fi
	$(QUIET_EDITABLE) $(PY) -m pip install --quiet -e ".[$(FLAVOUR),dev]"
	rm -f $(VENV)/.installed-*
	touch $(STAMP)

# hello_classification on the default model: GPU with CPU fallback (GPU skipped where absent), then the split
# configuration (IsNaN/IsInf on CPU, the rest on OPENVINO where the OpenVINO EP is installed), -pc on.
demo: $(STAMP)
	$(VENV)/bin/hello_classification -m models/digits.onnx -i samples/images/digit_3.png -d HETERO:GPU,CPU -pc
	$(VENV)/bin/hello_classification -m models/digits.onnx -i samples/images/digit_7.png -d HETERO:GPU,OPENVINO,CPU -pc

test: $(STAMP)
	$(PY) -m pytest -q

# ruff, then the package's shape: imports go down the layers only (import-linter, contracts in
# pyproject.toml), no import cycle, no module over 600 lines, no class over 300 (tools/check_layout.py).
lint: $(STAMP)
	$(VENV)/bin/ruff check .
	$(VENV)/bin/ruff format --check --quiet .
	$(VENV)/bin/lint-imports --no-cache
	$(PY) tools/check_layout.py

clean:
	rm -rf $(VENV) .pytest_cache .ruff_cache .hypothesis .cache

$(BENCH_STAMP): $(STAMP) pyproject.toml
	$(QUIET_EDITABLE) $(PY) -m pip install --quiet -e ".[$(FLAVOUR),dev,bench]"
	touch $(BENCH_STAMP)

# The benchmark harness (bench/README.md): hetero-cli against one ORT session and native OpenVINO, the
# targets of issue 6 checked, results in bench/results/. One thread per session for every runtime alike:
# on a small shared machine 2-thread pools make single inferences jitter by +-25%, far above the 2% judged.
# Each runtime's default threads: make bench BENCH_ARGS=--threads=0
BENCH_ARGS ?= --threads=1
bench: $(STAMP) $(BENCH_STAMP)
	$(PY) bench/run.py $(BENCH_ARGS)

# The CUDA rows (bench/gpu.py): hetero-cli against one ORT session [CUDA, CPU] on an NVIDIA GPU, results in
# bench/results/gpu/. Needs onnxruntime-gpu: make FLAVOUR=gpu bench-gpu (says so and measures nothing without).
bench-gpu: $(STAMP)
	$(PY) bench/gpu.py

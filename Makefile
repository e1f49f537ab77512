# hetero-cli: `make demo` runs the main job, `make test` runs every test. Both install first if needed.
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed
# The OpenVINO flavour of ONNX Runtime gives two real devices (OPENVINO and CPU) on x86-64; elsewhere the CPU one.
ARCH := $(shell uname -m)
ifeq ($(ARCH),x86_64)
FLAVOUR ?= openvino
else
FLAVOUR ?= cpu
endif

.PHONY: install demo test lint clean

install: $(STAMP)

$(STAMP): pyproject.toml
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -e ".[$(FLAVOUR),dev]"
	touch $(STAMP)

# hello_classification on the default model: GPU with CPU fallback (GPU skipped where absent), then the split
# configuration (IsNaN/IsInf on CPU, the rest on OPENVINO where the OpenVINO EP is installed), -pc on.
demo: $(STAMP)
	$(VENV)/bin/hello_classification -m models/digits.onnx -i samples/images/digit_3.png -d HETERO:GPU,CPU -pc
	$(VENV)/bin/hello_classification -m models/digits.onnx -i samples/images/digit_7.png -d HETERO:GPU,OPENVINO,CPU -pc

test: $(STAMP)
	$(PY) -m pytest -q

lint: $(STAMP)
	$(VENV)/bin/ruff check .

clean:
	rm -rf $(VENV) .pytest_cache .ruff_cache .hypothesis

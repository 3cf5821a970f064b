# The two commands of the README, and the steps they are made of.
BUILD_DIR ?= build
JOBS ?= $(shell nproc)
# make's own "Entering directory" lines, once per target cmake's makefiles recurse into, say
# nothing a reader needs.
MAKEFLAGS += --no-print-directory
# The CUDA backend: `make build` and `make test` compile it wherever the toolkit is (every CUDA
# file is compiled even where no GPU can run it); `make demo` builds it only where a GPU is
# visible. KILN_CUDA=ON or OFF decides for either.
KILN_CUDA ?=
cuda_flag = $(if $(KILN_CUDA),-DKILN_CUDA=$(KILN_CUDA),-UKILN_CUDA)

.PHONY: setup build test demo bench clean

setup:
	@scripts/setup.sh

build:
	@cmake -S . -B $(BUILD_DIR) -G "Unix Makefiles" -DCMAKE_BUILD_TYPE=Release $(cuda_flag) >/dev/null
	@cmake --build $(BUILD_DIR) -j $(JOBS)

test: setup build
	@cd $(BUILD_DIR) && ctest --output-on-failure -j $(JOBS)

demo: setup
	@BUILD_DIR=$(BUILD_DIR) JOBS=$(JOBS) KILN_CUDA=$(KILN_CUDA) scripts/demo.sh

bench: setup build
	@/usr/bin/python3 bench/cpu_step.py

clean:
	rm -rf $(BUILD_DIR)

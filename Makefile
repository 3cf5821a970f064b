# The two commands of the README, and the steps they are made of.
BUILD_DIR ?= build
JOBS ?= $(shell nproc)

.PHONY: setup build test demo bench clean

setup:
	@scripts/setup.sh

build:
	@cmake -S . -B $(BUILD_DIR) -G "Unix Makefiles" -DCMAKE_BUILD_TYPE=Release >/dev/null
	@cmake --build $(BUILD_DIR) -j $(JOBS)

test: setup build
	@cd $(BUILD_DIR) && ctest --output-on-failure -j $(JOBS)

demo: setup build
	@scripts/demo.sh

bench: setup build
	@/usr/bin/python3 bench/cpu_step.py

clean:
	rm -rf $(BUILD_DIR)

# The two entry points of the README (demo, test) and the steps they are made of.
.PHONY: all setup build build-asan test test-asan demo images clean

JOBS ?= $(shell nproc)

all: build

setup:
	scripts/setup.sh

build: setup
	cmake --preset dev >/dev/null
	cmake --build --preset dev -j $(JOBS)

build-asan: setup
	cmake --preset asan >/dev/null
	cmake --build --preset asan -j $(JOBS)

# Unit tests under ASan + UBSan first, then every test (unit, smoke, model, root) on the dev build;
# the last line printed is ctest's summary of the full run. No retries: a test that fails by
# timing gets its timing fixed.
test: build-asan build
	ctest --preset asan -j $(JOBS)
	ctest --preset dev

demo: build
	scripts/demo.sh

# OCI images of the agent and the worker (and the CUDA worker where nvcc is), from Debian packages.
images: setup
	CONTAINERS_CONF=$(CURDIR)/tests/containers/containers.conf images/build.sh

clean:
	rm -rf build

# The two set-up commands of README.md: `make demo` and `make test`.
# Both install what is missing (Debian packages, the npm reader used by the
# interop tests), configure and build with CMake, then do their job.

BUILD      ?= build
BUILD_SAN  ?= build-sanitize
BUILD_FUZZ ?= build-fuzz
BUILD_CUDA ?= build-cuda
# The CUDA build of `make test-cuda` (docs/gpu.md): one architecture keeps
# CI's compile short (sm_90: H100/H200); the library's default is 80;90.
CUDA_ARCHS ?= 90
NVCC       ?= $(shell command -v nvcc 2>/dev/null || ls /usr/local/cuda/bin/nvcc 2>/dev/null)
FUZZ_SECONDS ?= 50
JOBS       ?= $(shell nproc)
DEMO_OUT   ?= demo-out
SUDO       := $(shell [ "$$(id -u)" = 0 ] || echo sudo)

DEB_PACKAGES := build-essential cmake pkg-config \
  libfftw3-dev libblosc-dev libzstd-dev zlib1g-dev libyaml-dev libjansson-dev \
  libsuitesparse-dev libtiff-dev libpng-dev libxml2-dev libopenmpi-dev openmpi-bin libcmocka-dev \
  python3 python3-numpy python3-scipy python3-skimage python3-zarr python3-numcodecs \
  python3-jsonschema python3-yaml python3-pil python3-tifffile \
  python3-dev python3-pip python3-setuptools

# Debian's clang and the libFuzzer runtime for its version (make fuzz).
FUZZ_PACKAGES := clang libclang-rt-dev

.PHONY: all deps deps-test build test test-sanitize test-cuda fuzz demo bench clean install

all: build

# Install only what is missing, so a prepared machine pays nothing.
deps:
	@missing=$$(for p in $(DEB_PACKAGES); do dpkg-query -W -f='$${Status}\n' $$p 2>/dev/null | grep -q 'ok installed' || echo $$p; done); \
	if [ -n "$$missing" ]; then \
	  echo "installing Debian packages:$$missing" | tr '\n' ' '; echo; \
	  $(SUDO) apt-get update -qq && \
	  DEBIAN_FRONTEND=noninteractive $(SUDO) apt-get install -y -qq --no-install-recommends $$missing; \
	fi
	@if ! command -v npm >/dev/null 2>&1; then \
	  DEBIAN_FRONTEND=noninteractive $(SUDO) apt-get install -y -qq --no-install-recommends nodejs npm; fi
	@# zarrita reads 0.5 stores; vizarr's built viewer and playwright-core
	@# (driving Debian's chromium) open fused plates (test_vizarr.py).
	@if [ ! -d tests/interop/js/node_modules/zarrita ] || [ ! -d tests/interop/js/node_modules/@galaxyproject/vizarr ] || \
	    [ ! -d tests/interop/js/node_modules/playwright-core ]; then \
	  (cd tests/interop/js && npm install --no-audit --no-fund --silent); fi

# What only the tests need: headless Chromium opens the QC report
# (tests/interop/test_report.py) and vizarr's plate view (test_vizarr.py).
TEST_PACKAGES := chromium

deps-test: deps
	@missing=$$(for p in $(TEST_PACKAGES); do dpkg-query -W -f='$${Status}\n' $$p 2>/dev/null | grep -q 'ok installed' || echo $$p; done); \
	if [ -n "$$missing" ]; then \
	  echo "installing Debian packages:$$missing" | tr '\n' ' '; echo; \
	  $(SUDO) apt-get update -qq && \
	  DEBIAN_FRONTEND=noninteractive $(SUDO) apt-get install -y -qq --no-install-recommends $$missing; \
	fi

$(BUILD)/Makefile: CMakeLists.txt
	cmake -S . -B $(BUILD) -DCMAKE_BUILD_TYPE=RelWithDebInfo

build: deps
	cmake -S . -B $(BUILD) -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
	cmake --build $(BUILD) -j $(JOBS)

test: build deps-test
	cd $(BUILD) && ctest --output-on-failure -j $(JOBS)

# Same tests under AddressSanitizer + UndefinedBehaviorSanitizer (CI runs it).
test-sanitize: deps deps-test
	cmake -S . -B $(BUILD_SAN) -DCMAKE_BUILD_TYPE=Debug -DTESSERA_SANITIZE=ON >/dev/null
	cmake --build $(BUILD_SAN) -j $(JOBS)
	cd $(BUILD_SAN) && ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 \
	  UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 ctest --output-on-failure -j $(JOBS)

# The CUDA backend (docs/gpu.md), when nvcc is present: configured with
# -DTESSERA_CUDA=ON, built, and its tests run: test_gpu compares the GPU
# with the CPU byte for byte on a device and skips (77) without one;
# test_gpu_cli checks --device either way. Without nvcc it says so and
# succeeds (nothing to build).
test-cuda: deps deps-test
	@if [ -z "$(NVCC)" ]; then echo "test-cuda: no nvcc (CUDA toolkit) found; the CUDA backend is not built"; exit 0; fi; \
	set -e; \
	cmake -S . -B $(BUILD_CUDA) -DCMAKE_BUILD_TYPE=RelWithDebInfo -DTESSERA_CUDA=ON \
	  -DCMAKE_CUDA_COMPILER=$(NVCC) -DCMAKE_CUDA_ARCHITECTURES="$(CUDA_ARCHS)" >/dev/null; \
	cmake --build $(BUILD_CUDA) -j $(JOBS) --target tessera_cli test_gpu test_fuse_kernels; \
	cd $(BUILD_CUDA) && ctest --output-on-failure -R 'unit/test_gpu|interop/test_gpu_cli|unit/test_fuse_kernels'

# libFuzzer targets of tests/fuzz (docs/fuzz.md), built with clang under
# ASan + UBSan and run FUZZ_SECONDS each; any crash, leak, timeout or OOM
# fails, its input saved under $(BUILD_FUZZ)/fuzz-artifacts (CI runs it).
fuzz: deps
	@missing=$$(for p in $(FUZZ_PACKAGES); do dpkg-query -W -f='$${Status}\n' $$p 2>/dev/null | grep -q 'ok installed' || echo $$p; done); \
	if [ -n "$$missing" ]; then \
	  echo "installing Debian packages:$$missing" | tr '\n' ' '; echo; \
	  $(SUDO) apt-get update -qq && \
	  DEBIAN_FRONTEND=noninteractive $(SUDO) apt-get install -y -qq --no-install-recommends $$missing; \
	fi
	CC=clang cmake -S . -B $(BUILD_FUZZ) -DCMAKE_BUILD_TYPE=RelWithDebInfo -DTESSERA_FUZZ=ON -DTESSERA_MPI=OFF >/dev/null
	cmake --build $(BUILD_FUZZ) -j $(JOBS) --target fuzz_targets
	tests/fuzz/run_fuzz.sh $(BUILD_FUZZ) $(FUZZ_SECONDS)

# A small synthetic plate, stitched end to end, inspected, previewed.
demo: build
	rm -rf $(DEMO_OUT) && mkdir -p $(DEMO_OUT)
	$(BUILD)/tessera simulate -o $(DEMO_OUT)/plate.ome.zarr --wells A/1,A/2 --grid 4x3 \
	  --tile 256x320 --overlap 32 --jitter 4 --channels 2 --seed 1 --truth $(DEMO_OUT)/truth.yaml
	$(BUILD)/tessera info $(DEMO_OUT)/plate.ome.zarr
	$(BUILD)/tessera stitch $(DEMO_OUT)/plate.ome.zarr -o $(DEMO_OUT)/mosaic.ome.zarr --overlap 32 \
	  --shifts-out $(DEMO_OUT)/shifts.yaml --json
	$(BUILD)/tessera info $(DEMO_OUT)/mosaic.ome.zarr
	$(BUILD)/tessera preview $(DEMO_OUT)/mosaic.ome.zarr -o $(DEMO_OUT)/mosaic.png --shifts $(DEMO_OUT)/shifts.yaml
	@echo "demo output: $(DEMO_OUT)/ (plate.ome.zarr, shifts.yaml, mosaic.ome.zarr, mosaic.png)"

bench: build
	bash bench/run_all.sh $(BUILD)

install: build
	cmake --install $(BUILD)

clean:
	rm -rf $(BUILD) $(BUILD_SAN) $(BUILD_FUZZ) $(BUILD_CUDA) $(DEMO_OUT)

# Thin wrapper over CMake. Everything builds into build/ (programs in build/bin, libraries in build/lib).
BUILD   ?= build
JOBS    ?= $(shell nproc 2>/dev/null || echo 2)
CMAKE_FLAGS ?=

.PHONY: all configure test demo bench clean scalar aarch64 test-aarch64 mpi

all: configure
	cmake --build $(BUILD) -j $(JOBS)

configure:
	@test -f $(BUILD)/CMakeCache.txt || cmake -S . -B $(BUILD) -DCMAKE_BUILD_TYPE=Release $(CMAKE_FLAGS)

test: all
	cd $(BUILD) && ctest --output-on-failure -j $(JOBS)

# Scalar reference kernels only, in build-scalar/.
scalar:
	$(MAKE) BUILD=build-scalar CMAKE_FLAGS="-DGGML_NATIVE=OFF -DGGML_SCALAR=ON" test

# Cross build for aarch64 (NEON + dot product), tests run under qemu-aarch64.
aarch64:
	@test -f build-aarch64/CMakeCache.txt || cmake -S . -B build-aarch64 -DCMAKE_BUILD_TYPE=Release \
		-DCMAKE_TOOLCHAIN_FILE=cmake/aarch64-linux-gnu.cmake
	cmake --build build-aarch64 -j $(JOBS)

test-aarch64: aarch64
	cd build-aarch64 && ctest --output-on-failure -j $(JOBS)

# Data-parallel fine-tuning over MPI (needs Open MPI or MPICH, e.g. Debian's libopenmpi-dev and
# openmpi-bin), in build-mpi/: llama-finetune with -DGGML_MPI=ON, and its tests under mpirun.
mpi:
	@test -f build-mpi/CMakeCache.txt || cmake -S . -B build-mpi -DCMAKE_BUILD_TYPE=Release -DGGML_MPI=ON $(CMAKE_FLAGS)
	cmake --build build-mpi -j $(JOBS) --target llama-finetune test-finetune-mpi
	cd build-mpi && ctest --output-on-failure -R FinetuneMpi

# Generates text with llama-cli from the default model (the runtime arrives with a later issue).
demo: all
	@if [ -x $(BUILD)/bin/llama-cli ]; then \
		models/download.sh && $(BUILD)/bin/llama-cli -m models/stories260K.gguf -n 128; \
	else \
		echo "make demo: llama-cli is not built yet (the llama runtime is the next milestone)"; exit 1; \
	fi

bench: all
	@for b in $(BUILD)/bin/bench-*; do [ -x "$$b" ] && "$$b"; done

clean:
	rm -rf build build-scalar build-aarch64 build-mpi

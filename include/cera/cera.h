/* cera's C ABI: load a GGUF model, generate (streamed through a callback, cancellable), chat
 * through the model's template, tokenize, detokenize, embed. Plain C99: opaque handles, status
 * codes, and for each failure a message (cera_last_error) naming the input, the limit and what to
 * change. No C++ type or exception crosses it. Built on the C++ facade (cera/engine.h).
 *
 * Ownership: whatever a cera_* function hands out (an engine, a request, a string, token ids,
 * embeddings) is freed by its matching cera_*_free; passing NULL to those is a no-op.
 * Threads: an engine may be used from several threads at once; callbacks run on the engine's own
 * thread and must return quickly. */
#ifndef CERA_CERA_H
#define CERA_CERA_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef enum cera_status {
  CERA_OK = 0,
  CERA_INVALID_ARGUMENT = 1,
  CERA_NOT_FOUND = 2,
  CERA_CORRUPT = 3,
  CERA_UNSUPPORTED = 4,
  CERA_IO = 5,
  CERA_OUT_OF_RANGE = 6,
  CERA_CANCELLED = 7,
  CERA_UNAVAILABLE = 8,
  CERA_INTERNAL = 9
} cera_status;

/* The message of this thread's last failed call ("" when none failed); valid until the thread's
 * next cera_* call. */
const char* cera_last_error(void);
const char* cera_status_name(cera_status status); /* "ok", "invalid argument", ... */

typedef struct cera_engine cera_engine;
typedef struct cera_request cera_request;

typedef enum cera_device { CERA_DEVICE_AUTO = 0, CERA_DEVICE_CPU = 1, CERA_DEVICE_CUDA = 2 } cera_device;

typedef struct cera_engine_options {
  cera_device device;
  int32_t n_ctx;            /* tokens per request; 0: the model's training context, at most 4096 */
  int32_t n_threads;        /* 0: every core */
  int32_t max_parallel;     /* requests generating at once; 0: 4 */
  int32_t max_batch_tokens; /* 0: 512 */
} cera_engine_options;
/* The defaults (device auto, every other field 0). */
cera_engine_options cera_engine_options_default(void);

/* options may be NULL (the defaults). On success *out is the engine (cera_engine_free). */
cera_status cera_engine_load(const char* model_path, const cera_engine_options* options, cera_engine** out);
void cera_engine_free(cera_engine* engine); /* cancels what is still generating */

typedef struct cera_model_info {
  const char* architecture; /* owned by the engine */
  const char* name;
  const char* device;
  int32_t n_vocab;
  int32_t n_embd;
  int32_t n_ctx_train;
  int32_t n_ctx;
  bool generates;
  bool has_chat_template;
} cera_model_info;
cera_status cera_engine_info(const cera_engine* engine, cera_model_info* out);

typedef enum cera_constraint_kind {
  CERA_CONSTRAINT_NONE = 0,
  CERA_CONSTRAINT_GBNF = 1,
  CERA_CONSTRAINT_JSON_SCHEMA = 2,
  CERA_CONSTRAINT_JSON_OBJECT = 3
} cera_constraint_kind;

typedef struct cera_generate_options {
  int32_t max_tokens;       /* >= 0 */
  float temperature;        /* 0: greedy */
  int32_t top_k;            /* <= 0: off */
  float top_p;              /* >= 1: off */
  float min_p;              /* <= 0: off */
  float repeat_penalty;     /* 1: off */
  bool has_seed;            /* false: a random seed */
  uint64_t seed;
  const char* const* stop;  /* n_stop strings the reply ends before; may be NULL */
  size_t n_stop;
  cera_constraint_kind constraint;
  const char* constraint_source; /* the grammar or schema text; NULL for none or JSON_OBJECT */
} cera_generate_options;
/* The defaults: max_tokens 256, temperature 0.8, top_k 40, top_p 0.95, min_p 0.05, no penalty,
 * random seed, no stop strings, no constraint. */
cera_generate_options cera_generate_options_default(void);

typedef enum cera_finish_reason {
  CERA_FINISH_END_OF_GENERATION = 0,
  CERA_FINISH_MAX_TOKENS = 1,
  CERA_FINISH_STOP_STRING = 2,
  CERA_FINISH_CANCELLED = 3,
  CERA_FINISH_CONTEXT_FULL = 4
} cera_finish_reason;

/* Receives each piece of text as it becomes final (whole UTF-8 characters; `text` is not
 * NUL-terminated and is valid only during the call). Return false to cancel the generation. */
typedef bool (*cera_text_callback)(const char* text, size_t length, void* user_data);

typedef struct cera_result {
  char* text; /* the whole reply, NUL-terminated; freed by cera_result_free */
  size_t text_length;
  cera_finish_reason finish_reason;
  int32_t n_prompt_tokens;
  int32_t n_generated_tokens;
} cera_result;
void cera_result_free(cera_result* result); /* frees result->text, not result itself */

typedef struct cera_chat_message {
  const char* role; /* "system", "user", "assistant", "tool" */
  const char* content;
} cera_chat_message;

/* Starts a generation and returns at once; the callback (may be NULL) streams its text. Then
 * cera_request_wait for the result, cera_request_cancel from any thread, cera_request_free. */
cera_status cera_generate_start(cera_engine* engine, const char* prompt, const cera_generate_options* options,
                                cera_text_callback on_text, void* user_data, cera_request** out);
cera_status cera_chat_start(cera_engine* engine, const cera_chat_message* messages, size_t n_messages,
                            const cera_generate_options* options, cera_text_callback on_text, void* user_data,
                            cera_request** out);
void cera_request_cancel(cera_request* request);
/* Blocks until the generation ends; *out is filled (cera_result_free). A cancelled generation is
 * a result (finish_reason CERA_FINISH_CANCELLED), not an error. */
cera_status cera_request_wait(cera_request* request, cera_result* out);
void cera_request_free(cera_request* request); /* cancels it first if it has not ended */

/* Blocking forms: start, wait, free. */
cera_status cera_generate(cera_engine* engine, const char* prompt, const cera_generate_options* options,
                          cera_text_callback on_text, void* user_data, cera_result* out);
cera_status cera_chat(cera_engine* engine, const cera_chat_message* messages, size_t n_messages,
                      const cera_generate_options* options, cera_text_callback on_text, void* user_data,
                      cera_result* out);

/* The prompt cera_chat evaluates (the assistant's turn next when add_generation_prompt); *out
 * is NUL-terminated, freed by cera_string_free. */
cera_status cera_chat_render(const cera_engine* engine, const cera_chat_message* messages, size_t n_messages,
                             bool add_generation_prompt, char** out);
void cera_string_free(char* text);

typedef struct cera_tokens {
  int32_t* ids;
  size_t n;
} cera_tokens;
cera_status cera_tokenize(const cera_engine* engine, const char* text, size_t length, bool add_special,
                          bool parse_special, cera_tokens* out);
void cera_tokens_free(cera_tokens* tokens); /* frees tokens->ids */
cera_status cera_detokenize(const cera_engine* engine, const int32_t* ids, size_t n, char** out);

typedef enum cera_pooling {
  CERA_POOLING_MODEL_DEFAULT = 0,
  CERA_POOLING_NONE = 1,
  CERA_POOLING_MEAN = 2,
  CERA_POOLING_CLS = 3,
  CERA_POOLING_LAST = 4
} cera_pooling;

typedef struct cera_embeddings {
  float* values;      /* n_texts * n_embd floats, text after text (pooled) */
  size_t n_texts;
  size_t n_embd;
} cera_embeddings;
/* One pooled vector per text (CERA_POOLING_NONE is refused here: it has one vector per token). */
cera_status cera_embed(cera_engine* engine, const char* const* texts, size_t n_texts, cera_pooling pooling,
                       bool normalize, cera_embeddings* out);
void cera_embeddings_free(cera_embeddings* embeddings); /* frees embeddings->values */

#ifdef __cplusplus
}
#endif

#endif /* CERA_CERA_H */

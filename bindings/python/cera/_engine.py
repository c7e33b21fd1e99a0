"""cera.Engine: the keyword-argument face of the extension's Engine (cera._cera).

Each call fills the facade's option structs from keyword arguments (None: the facade's default,
so its defaults live in one place, include/cera/engine.h) and hands them to C++, which does the
work with the GIL released. Explicit keyword-only signatures make an unknown or misspelt option a
TypeError, as Python callers expect.
"""

from __future__ import annotations

import json
import os
from typing import Any, Iterable, Literal, Mapping, Optional, Sequence, Union, overload

from . import _cera
from ._cera import ChatMessage, Completion, InvalidArgumentError, ModelInfo, Stream

Device = Literal["auto", "cpu", "cuda"]
KvType = Literal["auto", "f32", "f16"]
Pooling = Literal["none", "mean", "cls", "last"]
Message = Union[Mapping[str, str], ChatMessage]
JsonSchema = Union[str, Mapping[str, Any]]


class Engine:
    """A GGUF model loaded for generation, chat, tokens and embeddings.

    Loading takes the model's weights into memory (and onto the GPU with device "cuda"). An
    Engine may be used from several threads at once: requests in flight are batched together.
    close() (or leaving a ``with`` block) frees it once no Stream of it is still open.
    """

    def __init__(
        self,
        path: Union[str, os.PathLike[str]],
        *,
        device: Device = "auto",
        n_ctx: Optional[int] = None,
        n_threads: Optional[int] = None,
        max_parallel: Optional[int] = None,
        max_batch_tokens: Optional[int] = None,
        kv_type: KvType = "auto",
        tensor_parallel: Optional[int] = None,
    ) -> None:
        """Loads the GGUF file at `path`.

        device: "auto" (CUDA when a GPU is there and cera was built with it, else the CPU),
        "cpu" or "cuda". n_ctx: tokens per request, prompt and output (None: the model's
        training context, at most 4096). n_threads: CPU threads (None: every core).
        max_parallel: requests generating at once (None: 4); more wait in a queue.
        max_batch_tokens: tokens per forward, and the longest text embed() takes (None: 512).
        kv_type: element type of the KV cache, "auto", "f32" or "f16".
        tensor_parallel: ranks the model is split over (None: 1): CUDA GPUs 0..N-1, or CPU
        backends sharing n_threads; each holds 1/N of the weights and of the KV cache.
        Raises NotFoundError (a FileNotFoundError) when there is no such file.
        """
        config = _cera.EngineConfig()
        _assign(config, model_path=os.fspath(path), device=device, kv_type=kv_type)
        _assign(config, n_ctx=n_ctx, n_threads=n_threads, max_parallel=max_parallel, max_batch_tokens=max_batch_tokens)
        _assign(config, tensor_parallel=tensor_parallel)
        self._engine = _cera.Engine.load(config)

    @property
    def info(self) -> ModelInfo:
        """What was loaded: architecture, name, device, n_vocab, n_embd, n_ctx, ..."""
        return self._engine.info

    @property
    def path(self) -> str:
        return self._engine.path

    @property
    def closed(self) -> bool:
        return self._engine.closed

    def close(self) -> None:
        """Frees the model (at once, or when the last open Stream of it closes). Idempotent; any
        later call raises UnavailableError."""
        self._engine.close()

    def __enter__(self) -> Engine:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def __repr__(self) -> str:
        state = "closed" if self.closed else repr(self.info)
        return f"cera.Engine({self.path!r}, {state})"

    @overload
    def generate(
        self,
        prompt: str,
        *,
        max_tokens: Optional[int] = ...,
        temperature: Optional[float] = ...,
        top_k: Optional[int] = ...,
        top_p: Optional[float] = ...,
        min_p: Optional[float] = ...,
        repeat_penalty: Optional[float] = ...,
        penalty_last_n: Optional[int] = ...,
        frequency_penalty: Optional[float] = ...,
        presence_penalty: Optional[float] = ...,
        seed: Optional[int] = ...,
        stop: Union[str, Sequence[str], None] = ...,
        grammar: Optional[str] = ...,
        json_schema: Optional[JsonSchema] = ...,
        json_object: bool = ...,
        add_special: bool = ...,
        parse_special: bool = ...,
        stream: Literal[False] = ...,
    ) -> Completion: ...

    @overload
    def generate(
        self,
        prompt: str,
        *,
        max_tokens: Optional[int] = ...,
        temperature: Optional[float] = ...,
        top_k: Optional[int] = ...,
        top_p: Optional[float] = ...,
        min_p: Optional[float] = ...,
        repeat_penalty: Optional[float] = ...,
        penalty_last_n: Optional[int] = ...,
        frequency_penalty: Optional[float] = ...,
        presence_penalty: Optional[float] = ...,
        seed: Optional[int] = ...,
        stop: Union[str, Sequence[str], None] = ...,
        grammar: Optional[str] = ...,
        json_schema: Optional[JsonSchema] = ...,
        json_object: bool = ...,
        add_special: bool = ...,
        parse_special: bool = ...,
        stream: Literal[True],
    ) -> Stream: ...

    def generate(
        self,
        prompt: str,
        *,
        max_tokens: Optional[int] = None,
        temperature: Optional[float] = None,
        top_k: Optional[int] = None,
        top_p: Optional[float] = None,
        min_p: Optional[float] = None,
        repeat_penalty: Optional[float] = None,
        penalty_last_n: Optional[int] = None,
        frequency_penalty: Optional[float] = None,
        presence_penalty: Optional[float] = None,
        seed: Optional[int] = None,
        stop: Union[str, Sequence[str], None] = None,
        grammar: Optional[str] = None,
        json_schema: Optional[JsonSchema] = None,
        json_object: bool = False,
        add_special: bool = True,
        parse_special: bool = True,
        stream: bool = False,
    ) -> Union[Completion, Stream]:
        """Completes `prompt` (raw text, no chat template).

        Sampling (None: cera's default): temperature (0.8; 0 is greedy), top_k (40; <= 0 off),
        top_p (0.95; 1 off), min_p (0.05; 0 off), repeat_penalty (1), penalty_last_n (64),
        frequency_penalty and presence_penalty (0), seed (None: random; the same seed, prompt
        and options give the same text). max_tokens: 256 when None. stop: the reply ends before
        any of these strings. At most one constraint: grammar (GBNF, root rule "root"),
        json_schema (a JSON Schema, as a str or a dict) or json_object=True (any JSON object).
        add_special: BOS before the prompt; parse_special: control-token texts in the prompt
        become control tokens.

        Returns a Completion; with stream=True a Stream, an iterator of text pieces whose
        `result` is the Completion. Ctrl-C cancels the request and raises KeyboardInterrupt.
        """
        options = _cera.GenerateOptions()
        _fill(options, max_tokens, _sampling(locals()), stop, grammar, json_schema, json_object)
        _assign(options, add_special=add_special, parse_special=parse_special)
        if stream:
            return self._engine.start(prompt, options)
        return self._engine.generate(prompt, options)

    @overload
    def chat(
        self,
        messages: Iterable[Message],
        *,
        max_tokens: Optional[int] = ...,
        temperature: Optional[float] = ...,
        top_k: Optional[int] = ...,
        top_p: Optional[float] = ...,
        min_p: Optional[float] = ...,
        repeat_penalty: Optional[float] = ...,
        penalty_last_n: Optional[int] = ...,
        frequency_penalty: Optional[float] = ...,
        presence_penalty: Optional[float] = ...,
        seed: Optional[int] = ...,
        stop: Union[str, Sequence[str], None] = ...,
        grammar: Optional[str] = ...,
        json_schema: Optional[JsonSchema] = ...,
        json_object: bool = ...,
        template_kwargs: Union[Mapping[str, Any], str, None] = ...,
        stream: Literal[False] = ...,
    ) -> Completion: ...

    @overload
    def chat(
        self,
        messages: Iterable[Message],
        *,
        max_tokens: Optional[int] = ...,
        temperature: Optional[float] = ...,
        top_k: Optional[int] = ...,
        top_p: Optional[float] = ...,
        min_p: Optional[float] = ...,
        repeat_penalty: Optional[float] = ...,
        penalty_last_n: Optional[int] = ...,
        frequency_penalty: Optional[float] = ...,
        presence_penalty: Optional[float] = ...,
        seed: Optional[int] = ...,
        stop: Union[str, Sequence[str], None] = ...,
        grammar: Optional[str] = ...,
        json_schema: Optional[JsonSchema] = ...,
        json_object: bool = ...,
        template_kwargs: Union[Mapping[str, Any], str, None] = ...,
        stream: Literal[True],
    ) -> Stream: ...

    def chat(
        self,
        messages: Iterable[Message],
        *,
        max_tokens: Optional[int] = None,
        temperature: Optional[float] = None,
        top_k: Optional[int] = None,
        top_p: Optional[float] = None,
        min_p: Optional[float] = None,
        repeat_penalty: Optional[float] = None,
        penalty_last_n: Optional[int] = None,
        frequency_penalty: Optional[float] = None,
        presence_penalty: Optional[float] = None,
        seed: Optional[int] = None,
        stop: Union[str, Sequence[str], None] = None,
        grammar: Optional[str] = None,
        json_schema: Optional[JsonSchema] = None,
        json_object: bool = False,
        template_kwargs: Union[Mapping[str, Any], str, None] = None,
        stream: bool = False,
    ) -> Union[Completion, Stream]:
        """Renders `messages` ([{"role": "user", "content": "..."}, ...]; roles "system",
        "user", "assistant", "tool") with the model's chat template, the assistant's turn next,
        and generates the reply. template_kwargs: extra template variables
        ({"enable_thinking": False}). The other options are generate()'s.
        """
        options = _cera.ChatOptions()
        _fill(options, max_tokens, _sampling(locals()), stop, grammar, json_schema, json_object)
        options.template_kwargs_json = _template_kwargs(template_kwargs)
        turns = _messages(messages)
        if stream:
            return self._engine.start_chat(turns, options)
        return self._engine.chat(turns, options)

    def render_chat(
        self,
        messages: Iterable[Message],
        *,
        add_generation_prompt: bool = True,
        template_kwargs: Union[Mapping[str, Any], str, None] = None,
    ) -> str:
        """The prompt chat() evaluates for these messages."""
        return self._engine.render_chat(_messages(messages), add_generation_prompt, _template_kwargs(template_kwargs))

    def tokenize(self, text: str, add_special: bool = True, *, parse_special: bool = False) -> list[int]:
        """Token ids of `text`. add_special: BOS (and the vocabulary's other added tokens);
        parse_special: control-token texts ("<|im_start|>") become control tokens."""
        return self._engine.tokenize(text, add_special, parse_special)

    def detokenize(self, ids: Sequence[int], *, render_special: bool = False) -> str:
        """The text of token ids; an id outside the vocabulary is an OutOfRangeError naming it.
        render_special: control tokens appear as their text."""
        return self._engine.detokenize(list(ids), render_special)

    # A str is a Sequence[str] too; overloads are tried in order, so this one wins for a str.
    @overload
    def embed(  # type: ignore[overload-overlap]
        self, input: str, *, pooling: Optional[Pooling] = ..., normalize: Optional[bool] = ..., as_numpy: Literal[False] = ...
    ) -> Union[list[float], list[list[float]]]: ...

    @overload
    def embed(
        self,
        input: Sequence[str],
        *,
        pooling: Optional[Pooling] = ...,
        normalize: Optional[bool] = ...,
        as_numpy: Literal[False] = ...,
    ) -> Union[list[list[float]], list[list[list[float]]]]: ...

    @overload
    def embed(
        self,
        input: Union[str, Sequence[str]],
        *,
        pooling: Optional[Pooling] = ...,
        normalize: Optional[bool] = ...,
        as_numpy: Literal[True],
    ) -> Any: ...

    def embed(
        self,
        input: Union[str, Sequence[str]],
        *,
        pooling: Optional[Pooling] = None,
        normalize: Optional[bool] = None,
        as_numpy: bool = False,
    ) -> Any:
        """The embedding of one text (a list of n_embd floats) or of each text of a list.

        pooling: "mean", "cls", "last" or "none" (every token's vector: a list of n_tokens rows
        of n_embd floats); None: the model's default (info.default_pooling). normalize: L2 norm 1
        for each vector (None: True). as_numpy: numpy float32 arrays instead of lists (numpy is
        not a dependency of cera; this needs it installed): (n_embd,) or (n_texts, n_embd), with
        pooling "none" (n_tokens, n_embd) per text.
        """
        single = isinstance(input, str)
        texts: list[str] = [input] if isinstance(input, str) else list(input)
        options = _cera.EmbedOptions()
        _assign(options, pooling=pooling, normalize=normalize)
        embeddings = self._engine.embed(texts, options)
        per_token = (pooling or self.info.default_pooling) == "none"
        if as_numpy:
            return _as_numpy(embeddings, single, per_token)
        vectors = [_rows(e) if per_token else e.values for e in embeddings]
        return vectors[0] if single else vectors


# What each option takes, for the TypeError of a wrong type (the extension's own message names
# neither the option nor the type it wants).
_WANTS = {
    "n_ctx": "an int",
    "n_threads": "an int",
    "max_parallel": "an int",
    "max_batch_tokens": "an int",
    "tensor_parallel": "an int",
    "max_tokens": "an int",
    "temperature": "a float",
    "top_k": "an int",
    "top_p": "a float",
    "min_p": "a float",
    "repeat_penalty": "a float",
    "penalty_last_n": "an int",
    "frequency_penalty": "a float",
    "presence_penalty": "a float",
    "seed": "an int or None",
    "stop": "a str or a list of str",
    "device": "'auto', 'cpu' or 'cuda'",
    "kv_type": "'auto', 'f32' or 'f16'",
    "pooling": "'none', 'mean', 'cls', 'last' or None",
    "normalize": "a bool",
    "add_special": "a bool",
    "parse_special": "a bool",
    "model_path": "a str or os.PathLike",
}


def _assign(target: object, **values: object) -> None:
    """Sets each attribute whose value is not None, leaving the facade's default otherwise."""
    for name, value in values.items():
        if value is None:
            continue
        try:
            setattr(target, name, value)
        except TypeError:
            raise TypeError(f"{name}={value!r} is a {type(value).__name__}: give {_WANTS.get(name, 'another type')}") from None


_SAMPLING_FIELDS = (
    "temperature",
    "top_k",
    "top_p",
    "min_p",
    "repeat_penalty",
    "penalty_last_n",
    "frequency_penalty",
    "presence_penalty",
    "seed",
)


def _sampling(arguments: Mapping[str, Any]) -> dict[str, Any]:
    """The sampling keyword arguments out of a generate()/chat() call's locals(): one list of their
    names here instead of two hand-copied dicts that could drift apart."""
    return {name: arguments[name] for name in _SAMPLING_FIELDS}


def _fill(
    options: _cera.GenerateOptions,
    max_tokens: Optional[int],
    sampling: Mapping[str, Any],
    stop: Union[str, Sequence[str], None],
    grammar: Optional[str],
    json_schema: Optional[JsonSchema],
    json_object: bool,
) -> None:
    _assign(options, max_tokens=max_tokens)
    _assign(options.sampling, **sampling)
    if stop is not None:
        _assign(options, stop=[stop] if isinstance(stop, str) else list(stop))
    given = [name for name, value in (("grammar", grammar), ("json_schema", json_schema)) if value is not None]
    if json_object:
        given.append("json_object")
    if len(given) > 1:
        raise InvalidArgumentError(f"{' and '.join(given)} are both given: a reply follows one constraint, pass one of them")
    constraint = _cera.Constraint()
    if grammar is not None:
        constraint.kind, constraint.source = "gbnf", grammar
    elif json_schema is not None:
        constraint.kind = "json_schema"
        constraint.source = json_schema if isinstance(json_schema, str) else json.dumps(json_schema)
    elif json_object:
        constraint.kind = "json_object"
    options.constraint = constraint


def _template_kwargs(kwargs: Union[Mapping[str, Any], str, None]) -> str:
    if kwargs is None:
        return ""
    return kwargs if isinstance(kwargs, str) else json.dumps(dict(kwargs))


def _messages(messages: Iterable[Message]) -> list[ChatMessage]:
    """The facade's ChatMessages from dicts; errors name the message by its index."""
    if isinstance(messages, (str, bytes, Mapping)):
        raise TypeError(f"messages is a {type(messages).__name__}: give a list of {{'role': ..., 'content': ...}} dicts")
    turns = []
    for i, m in enumerate(messages):
        if isinstance(m, ChatMessage):
            turns.append(m)
            continue
        if not isinstance(m, Mapping):
            raise TypeError(f"messages[{i}] is a {type(m).__name__}: give a dict with 'role' and 'content'")
        extra = sorted(set(m) - {"role", "content"})
        if extra:
            raise InvalidArgumentError(f"messages[{i}] has {', '.join(map(repr, extra))}: cera's chat takes only 'role' and 'content'")
        for key in ("role", "content"):
            if key not in m:
                raise InvalidArgumentError(f"messages[{i}] has no {key!r}: give every message a 'role' and a 'content'")
            if not isinstance(m[key], str):
                raise TypeError(f"messages[{i}][{key!r}] is a {type(m[key]).__name__}: give a str")
        turns.append(ChatMessage(m["role"], m["content"]))
    return turns


def _rows(e: _cera.Embedding) -> list[list[float]]:
    """Pooling "none": the token-major values as n_tokens rows."""
    values, n = e.values, e.n_tokens
    width = len(values) // n if n else 0
    return [values[t * width : (t + 1) * width] for t in range(n)]


def _as_numpy(embeddings: list[_cera.Embedding], single: bool, per_token: bool) -> Any:
    try:
        import numpy  # type: ignore[import-not-found, unused-ignore]
    except ImportError as e:
        raise ImportError("embed(as_numpy=True) needs numpy, which cera does not depend on: pip install numpy") from e
    arrays = [numpy.asarray(e.values, dtype=numpy.float32) for e in embeddings]
    if per_token:
        arrays = [a.reshape(e.n_tokens, -1) for a, e in zip(arrays, embeddings)]
        return arrays[0] if single else arrays
    if single:
        return arrays[0]
    return numpy.stack(arrays) if arrays else numpy.zeros((0, 0), numpy.float32)

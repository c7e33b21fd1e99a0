// cera serve's chat page: keeps the conversation, streams each reply from POST /v1/chat/completions
// (SSE read off fetch()'s body stream) and lets Stop abort the fetch, which the server sees as a
// disconnect and cancels. Model output goes into the page only through textContent.
"use strict";

const $ = (id) => document.getElementById(id);
const ui = {
  model: $("model"), newChat: $("new-chat"), log: $("log"), composer: $("composer"),
  input: $("input"), send: $("send"), stop: $("stop"),
  system: $("system"), temperature: $("temperature"), maxTokens: $("max-tokens"), apiKey: $("api-key"),
};

const kKeyStorage = "cera.apiKey";
let history = [];       // [{role, content}] of finished turns; the system prompt is added per request
let controller = null;  // AbortController of the reply in flight, null when idle

// ---- settings --------------------------------------------------------------------------------

ui.apiKey.value = localStorage.getItem(kKeyStorage) || "";
ui.apiKey.addEventListener("change", () => {
  const key = ui.apiKey.value.trim();
  if (key) localStorage.setItem(kKeyStorage, key); else localStorage.removeItem(kKeyStorage);
  loadModel();
});

function headers() {
  const h = { "Content-Type": "application/json" };
  const key = ui.apiKey.value.trim();
  if (key) h["Authorization"] = "Bearer " + key;
  return h;
}

// Empty fields are left out of the request so that the server's defaults apply.
function numberField(input) {
  const text = input.value.trim();
  return text === "" ? undefined : Number(text);
}

// ---- the model id in the header ----------------------------------------------------------------

async function loadModel() {
  try {
    const res = await fetch("/v1/models", { headers: headers() });
    if (res.status === 503) {             // still loading: ask again shortly
      ui.model.textContent = "loading model…";
      setTimeout(loadModel, 1000);
      return;
    }
    if (!res.ok) throw new Error(await errorText(res));
    const body = await res.json();
    ui.model.textContent = ui.model.title = body.data && body.data.length ? body.data[0].id : "(no model)";
    ui.model.classList.remove("bad");
  } catch (err) {
    ui.model.textContent = ui.model.title = err.message;  // the title shows what the ellipsis cut
    ui.model.classList.add("bad");
  }
}

// ---- the conversation view ---------------------------------------------------------------------

// Appends a bubble; returns its text and meta elements. role: "user", "assistant" or "error".
function addBubble(role, text) {
  const bubble = document.createElement("div");
  bubble.className = "msg " + role;
  const who = document.createElement("div");
  who.className = "who";
  who.textContent = role === "error" ? "error" : role;
  const body = document.createElement("div");
  body.className = "text";
  body.textContent = text;
  const meta = document.createElement("div");
  meta.className = "meta";
  bubble.append(who, body, meta);
  ui.log.append(bubble);
  scrollDown(true);
  return { bubble, body, meta };
}

// Follows the reply only while the reader is at the bottom; scrolling up to read stays put.
function scrollDown(force) {
  const log = ui.log;
  const near = log.scrollHeight - log.scrollTop - log.clientHeight < 80;
  if (force || near) log.scrollTop = log.scrollHeight;
}

function setBusy(busy) {
  ui.send.disabled = busy;
  ui.stop.disabled = !busy;
  document.body.classList.toggle("busy", busy);
}

// ---- errors ------------------------------------------------------------------------------------

// "HTTP 400 Bad Request: <error.message>" from the server's {"error": {...}} body, else its text.
async function errorText(res) {
  let detail = "";
  const raw = await res.text().catch(() => "");
  try {
    const body = JSON.parse(raw);
    detail = (body.error && (body.error.message || body.error.code)) || raw;
  } catch {
    detail = raw.trim();
  }
  let text = `HTTP ${res.status}${res.statusText ? " " + res.statusText : ""}`;
  if (detail) text += ": " + detail;
  const retry = res.headers.get("Retry-After");
  if (retry) text += ` (retry after ${retry} s)`;
  return text;
}

class ServerError extends Error {}

// ---- sending a turn ----------------------------------------------------------------------------

async function send() {
  const text = ui.input.value;
  if (!text.trim() || controller) return;
  ui.input.value = "";

  const turn = { role: "user", content: text };
  const convo = history;  // New chat swaps in a fresh array; a reply it aborted lands in the old one
  addBubble("user", text);
  const reply = addBubble("assistant", "");
  reply.bubble.classList.add("streaming");

  const messages = [];
  const system = ui.system.value.trim();
  if (system) messages.push({ role: "system", content: system });
  messages.push(...convo, turn);

  const request = { messages, stream: true, stream_options: { include_usage: true } };
  const temperature = numberField(ui.temperature);
  const maxTokens = numberField(ui.maxTokens);
  if (temperature !== undefined) request.temperature = temperature;
  if (maxTokens !== undefined) request.max_tokens = maxTokens;

  controller = new AbortController();
  setBusy(true);
  const started = performance.now();
  let firstToken = 0;   // performance.now() at the first content delta
  let chunks = 0;       // content deltas seen (one per token with cera, a guess if no usage arrives)
  let usage = null;
  let finish = null;
  let content = "";

  try {
    let res;
    try {
      res = await fetch("/v1/chat/completions", {
        method: "POST", headers: headers(), body: JSON.stringify(request), signal: controller.signal,
      });
    } catch (err) {
      if (err.name === "AbortError") throw err;
      throw new ServerError("Network error: could not reach the server (" + err.message + ")");
    }
    if (!res.ok) throw new ServerError(await errorText(res));

    let done = false;
    for await (const data of sseEvents(res.body)) {
      if (data === "[DONE]") { done = true; break; }
      const chunk = JSON.parse(data);
      if (chunk.error) throw new ServerError("Server error: " + (chunk.error.message || data));
      if (chunk.usage) usage = chunk.usage;
      const choice = chunk.choices && chunk.choices[0];
      if (!choice) continue;           // the usage chunk has "choices": []
      if (choice.finish_reason) finish = choice.finish_reason;
      const delta = choice.delta && choice.delta.content;
      if (delta) {
        if (!firstToken) firstToken = performance.now();
        chunks++;
        content += delta;
        reply.body.textContent = content;
        scrollDown(false);
      }
    }
    if (!done) throw new ServerError("The server closed the stream before it finished");
    convo.push(turn, { role: "assistant", content });
    reply.meta.textContent = stats(usage ? usage.completion_tokens : chunks, started, firstToken, finish);
  } catch (err) {
    if (err.name === "AbortError") {
      // Stopped: the partial reply stays on screen and in the conversation.
      convo.push(turn, { role: "assistant", content });
      reply.bubble.classList.add("stopped");
      reply.meta.textContent = "stopped · " + stats(chunks, started, firstToken, null);
    } else {
      // Refused or broken: the turn is not kept, so the next request is still a valid conversation.
      if (!content) reply.bubble.remove();
      const why = err instanceof ServerError ? err.message
        : err instanceof TypeError ? "Connection lost during the reply (" + err.message + ")"
        : "Error: " + err.message;
      addBubble("error", why);
      if (!ui.input.value) ui.input.value = text;
    }
  } finally {
    reply.bubble.classList.remove("streaming");
    controller = null;
    setBusy(false);
    ui.input.focus();
  }
}

// Yields the data of each server-sent event in a fetch() body ("data: ...\n\n"; multi-line data
// joined by "\n"; comments and other fields skipped). Decodes UTF-8 across chunk boundaries.
async function* sseEvents(body) {
  const reader = body.getReader();
  const decoder = new TextDecoder();
  let buffer = "";
  try {
    for (;;) {
      const { value, done } = await reader.read();
      buffer += decoder.decode(value || new Uint8Array(), { stream: !done });
      buffer = buffer.replace(/\r\n?/g, "\n");
      let end;
      while ((end = buffer.indexOf("\n\n")) >= 0) {
        const event = buffer.slice(0, end);
        buffer = buffer.slice(end + 2);
        const data = event.split("\n").filter((l) => l.startsWith("data:"))
          .map((l) => l.slice(l.startsWith("data: ") ? 6 : 5)).join("\n");
        if (data) yield data;
      }
      if (done) return;
    }
  } finally {
    reader.releaseLock();
  }
}

// "42 tokens · 130.2 tokens/s · first token 0.08 s · length". The rate counts tokens after the
// first over the time after it, so that prompt processing does not dilute the decode speed.
function stats(tokens, started, firstToken, finish) {
  const now = performance.now();
  const parts = [`${tokens} token${tokens === 1 ? "" : "s"}`];
  if (firstToken && tokens > 1 && now > firstToken) {
    parts.push(`${((tokens - 1) / ((now - firstToken) / 1000)).toFixed(1)} tokens/s`);
  }
  if (firstToken) parts.push(`first token ${((firstToken - started) / 1000).toFixed(2)} s`);
  if (finish === "length") parts.push("stopped at max tokens");
  return parts.join(" · ");
}

// ---- controls ----------------------------------------------------------------------------------

ui.composer.addEventListener("submit", (e) => { e.preventDefault(); send(); });
ui.input.addEventListener("keydown", (e) => {
  // Enter sends; Shift+Enter (and Enter while an input method is composing) inserts a newline.
  if (e.key === "Enter" && !e.shiftKey && !e.isComposing) {
    e.preventDefault();
    send();
  }
});
ui.stop.addEventListener("click", () => { if (controller) controller.abort(); });
ui.newChat.addEventListener("click", () => {
  if (controller) controller.abort();
  history = [];
  ui.log.replaceChildren();
  ui.input.focus();
});

loadModel();
ui.input.focus();

// The dashboard's only door to the service: the public HTTP API, sent with the tab's API key.

const KEY_STORAGE = "fire-api-key";

export const apiKey = {
  get: () => sessionStorage.getItem(KEY_STORAGE) ?? "",
  set(value) {
    if (value) sessionStorage.setItem(KEY_STORAGE, value);
    else sessionStorage.removeItem(KEY_STORAGE);
  },
};

/** An answer of the API that is not a success, carrying its problem+json body (title, detail, errors). */
export class ApiError extends Error {
  constructor(status, problem) {
    super(problem.detail || problem.title || "The service refused the request.");
    this.status = status;
    this.problem = problem;
  }
}

function authHeaders() {
  const key = apiKey.get();
  return key ? { "X-API-Key": key } : {};
}

async function send(path, init) {
  try {
    return await fetch(path, { ...init, headers: { ...authHeaders(), ...init.headers } });
  } catch (error) {
    if (error.name === "AbortError") throw error;
    throw new ApiError(0, { title: "No answer", detail: `The service did not answer (${error.message}).` });
  }
}

async function readProblem(response) {
  const text = await response.text();
  try {
    const body = JSON.parse(text);
    if (body && typeof body === "object") return body;
  } catch { /* not JSON: a proxy's page, say */ }
  return { title: response.statusText,
           detail: "The answer was not the service's own (a proxy's page, say): try again, or ask who runs the service." };
}

/**
 * The JSON answer of `method path`. `body` is sent as JSON unless it is FormData or a Blob.
 * Throws ApiError with the problem details on any answer but 2xx.
 */
export async function request(path, { method = "GET", body, signal } = {}) {
  const init = { method, signal, headers: {} };
  if (body instanceof FormData || body instanceof Blob) {
    init.body = body;
  } else if (body !== undefined) {
    init.body = JSON.stringify(body);
    init.headers["Content-Type"] = "application/json";
  }
  const response = await send(path, init);
  if (!response.ok) throw new ApiError(response.status, await readProblem(response));
  return response.status === 204 ? null : response.json();
}

export const get = (path, signal) => request(path, { signal });
export const post = (path, body) => request(path, { method: "POST", body });
export const put = (path, body) => request(path, { method: "PUT", body });
export const remove = path => request(path, { method: "DELETE" });

/** Save the answer of GET `path` as a file (the name its Content-Disposition gives, else `fallback`). */
export async function download(path, fallback) {
  const response = await send(path, { headers: {} });
  if (!response.ok) throw new ApiError(response.status, await readProblem(response));
  const name = /filename="([^"]+)"/.exec(response.headers.get("Content-Disposition") ?? "")?.[1] ?? fallback;
  const url = URL.createObjectURL(await response.blob());
  const anchor = Object.assign(document.createElement("a"), { href: url, download: name });
  document.body.append(anchor);
  anchor.click();
  anchor.remove();
  setTimeout(() => URL.revokeObjectURL(url), 0);
}

let openApi = null;

/** The service's OpenAPI document (defaults and descriptions of every request field), fetched once. */
function openApiDocument() {
  openApi ??= get("/openapi.json").catch(error => { openApi = null; throw error; });
  return openApi;
}

/** The schema named `name` in the OpenAPI document, with `$ref`s of its properties left as they are. */
export async function schema(name) {
  const document = await openApiDocument();
  return document.components.schemas[name];
}

function parseEvent(block) {
  const event = { type: "message", data: [], retry: null };
  for (const line of block.split("\n")) {
    const colon = line.indexOf(":");
    if (colon === 0) continue; // a comment
    const field = colon < 0 ? line : line.slice(0, colon);
    const value = colon < 0 ? "" : line.slice(colon + 1).replace(/^ /, "");
    if (field === "event") event.type = value;
    else if (field === "data") event.data.push(value);
    else if (field === "retry" && /^\d+$/.test(value)) event.retry = Number(value);
  }
  return { type: event.type, data: event.data.join("\n"), retry: event.retry };
}

async function* readEvents(response) {
  const reader = response.body.pipeThrough(new TextDecoderStream()).getReader();
  let buffer = "";
  for (;;) {
    const { value, done } = await reader.read();
    if (done) return;
    buffer = (buffer + value).replace(/\r\n?/g, "\n");
    let end;
    while ((end = buffer.indexOf("\n\n")) >= 0) {
      const block = buffer.slice(0, end);
      buffer = buffer.slice(end + 2);
      if (block.trim()) yield parseEvent(block);
    }
  }
}

const sleep = (ms, signal) => new Promise(resolve => {
  const timer = setTimeout(resolve, ms);
  signal?.addEventListener("abort", () => { clearTimeout(timer); resolve(); }, { once: true });
});

/**
 * The server-sent events of a job (`progress`, then one `status`), as `{type, job}`.
 * Read with fetch rather than EventSource so that the API key goes along as a header. A dropped stream
 * is opened again after the server's `retry`; the sequence ends after the `status` event or on `signal`.
 */
export async function* jobEvents(jobId, signal) {
  let retryMs = 1000;
  while (!signal?.aborted) {
    let response;
    try {
      response = await send(`/v1/jobs/${encodeURIComponent(jobId)}/events`,
                             { signal, headers: { Accept: "text/event-stream" } });
    } catch (error) {
      if (error.name === "AbortError") return;
      await sleep(retryMs, signal);
      continue;
    }
    if (!response.ok) throw new ApiError(response.status, await readProblem(response));
    try {
      for await (const event of readEvents(response)) {
        if (event.retry !== null) retryMs = event.retry;
        const job = JSON.parse(event.data);
        yield { type: event.type, job };
        if (event.type === "status") return;
      }
    } catch (error) {
      if (error.name === "AbortError") return;
    }
    await sleep(retryMs, signal);
  }
}

// The sender's routes (README, "The sender's HTTP contract"), through
// PocketBase's JS SDK where it fits, and XMLHttpRequest for uploads (fetch
// reports no upload progress). Nothing here is kept but the SDK's own auth
// store: the sender's token, in this browser's localStorage.
import PocketBase from "../vendor/pocketbase.es.mjs";

export const pb = new PocketBase(window.location.origin);
// Two lists loaded one after the other must not cancel each other.
pb.autoCancellation(false);

const BASE = "/api/transcriber";

// A refusal in the shape every 4xx has: {status, code, message, data}, plus Retry-After.
export class Refused extends Error {
  constructor(status, code, message, retryAfter, data) {
    super(message || code);
    this.status = status;
    this.code = code;
    this.retryAfter = retryAfter;
    this.data = data || {};
  }
}

function refusedFrom(err) {
  if (err instanceof Refused) return err;
  const status = err && typeof err.status === "number" ? err.status : 0;
  const data = (err && err.response) || {};
  if (status === 0) return new Refused(0, "network", String(err && err.message));
  return new Refused(status, data.code || "error", data.message || String(err.message || ""), undefined, data.data);
}

async function call(path, options) {
  try {
    return await pb.send(BASE + path, options || {});
  } catch (err) {
    throw refusedFrom(err);
  }
}

// A JSON POST as a plain request (a refusal's Retry-After is read from its headers); the answer's body,
// or {} for an answer without one.
async function post(path, body, signedIn) {
  const headers = { "Content-Type": "application/json" };
  if (signedIn) headers.Authorization = pb.authStore.token;
  let resp;
  try {
    resp = await fetch(path, { method: "POST", headers, body: JSON.stringify(body) });
  } catch (err) {
    throw new Refused(0, "network", String(err));
  }
  const answer = await resp.json().catch(() => ({}));
  if (!resp.ok) {
    const wait = Number(resp.headers.get("Retry-After") || 0);
    throw new Refused(resp.status, answer.code || "error", answer.message || "", wait || undefined, answer.data);
  }
  return answer;
}

// PocketBase's standard sign-in.
export async function signIn(email, password) {
  const body = await post("/api/collections/users/auth-with-password", { identity: email, password });
  pb.authStore.save(body.token, body.record);
  return body.record;
}

// A signed-in sender's new password: every other session ends; this one goes on with the fresh token.
export async function changePassword(oldPassword, password) {
  const body = await post(BASE + "/password", { old_password: oldPassword, password }, true);
  pb.authStore.save(body.token, body.record);
  return body.record;
}

// PocketBase's own password reset: a mail with a link to this page (#/reset/TOKEN), then the new password.
export const requestReset = (email) => post("/api/collections/users/request-password-reset", { email });
export const confirmReset = (token, password) =>
  post("/api/collections/users/confirm-password-reset", { token, password, passwordConfirm: password });

export const options = () => call("/options");
export const list = (page, perPage) => call("/records", { query: { page, perPage } });
export const poll = (id) => call("/records/" + encodeURIComponent(id));
export const resume = (id) => call("/records/" + encodeURIComponent(id) + "/resume", { method: "POST" });
export const rename = (id, title) =>
  call("/records/" + encodeURIComponent(id), { method: "PATCH", body: { title } });
export const transcriptJson = (id) =>
  call("/records/" + encodeURIComponent(id) + "/transcript", { query: { format: "json" } });

// The literary text (the transcript edited to be read): {content, paragraphs}.
export const textJson = (id) => call("/records/" + encodeURIComponent(id) + "/text", { query: { format: "json" } });

// The export in `format`, as a Blob (downloaded with the sender's Authorization, never a URL token):
// of the transcript, or (`what` = "text") of the literary text.
export async function exportBlob(id, format, what) {
  let resp;
  try {
    resp = await fetch(BASE + "/records/" + encodeURIComponent(id) + "/" + (what === "text" ? "text" : "transcript") + "?format=" + format, {
      headers: { Authorization: pb.authStore.token },
    });
  } catch (err) {
    throw new Refused(0, "network", String(err));
  }
  if (!resp.ok) {
    const body = await resp.json().catch(() => ({}));
    throw new Refused(resp.status, body.code || "error", body.message || "");
  }
  return resp.blob();
}

// A file token for the <audio> element (PocketBase's, a few minutes long, good for files only).
export async function fileToken() {
  return pb.files.getToken();
}

export function audioUrl(id, token) {
  return BASE + "/records/" + encodeURIComponent(id) + "/audio?token=" + encodeURIComponent(token);
}

// Uploads one file; `onProgress(fraction)` as it goes. Resolves to the poll body, or rejects with Refused.
export function upload(file, fields, onProgress) {
  return new Promise((resolve, reject) => {
    const form = new FormData();
    if (fields.title) form.append("title", fields.title);
    if (fields.language) form.append("language", fields.language);
    form.append("file", file, file.name || "recording");
    const xhr = new XMLHttpRequest();
    xhr.open("POST", BASE + "/records");
    xhr.setRequestHeader("Authorization", pb.authStore.token);
    xhr.responseType = "json";
    xhr.upload.onprogress = (ev) => {
      if (ev.lengthComputable) onProgress(ev.loaded / ev.total);
    };
    xhr.onload = () => {
      const body = xhr.response || {};
      if (xhr.status === 201) return resolve(body);
      const wait = Number(xhr.getResponseHeader("Retry-After") || 0);
      reject(new Refused(xhr.status, body.code || "error", body.message || "", wait || undefined));
    };
    xhr.onerror = () => reject(new Refused(0, "network", "network error"));
    xhr.send(form);
  });
}

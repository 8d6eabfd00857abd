// The sender's page: sign in, upload (files or a voice note), the live list of
// their recordings, and each recording with its transcript beside the audio;
// the password changed, or reset by mail. Plain modules, no build step; the
// only dependency is PocketBase's JS SDK (vendor/, see scripts/vendor-sdk).
// Routes: #/ (the list), #/r/{id} (one recording), #/password (a new one),
// #/forgot (ask for a reset mail), #/reset/{token} (the mail's link).
import * as api from "./api.js";
import * as i18n from "./i18n.js";
import { createLatest } from "./latest.js";
import { t } from "./i18n.js";
import * as recorder from "./recorder.js";

const PER_PAGE = 20;
const FORMATS = [
  { format: "txt", label: "TXT" },
  { format: "srt", label: "SRT" },
  { format: "vtt", label: "WebVTT" },
  { format: "json", label: "JSON" },
];
// A file token lives about three minutes; one older than this is renewed before the player needs it.
const TOKEN_FRESH_MS = 150 * 1000;

const state = {
  options: null, // GET /api/transcriber/options
  page: 1,
  list: null, // the page of the list on screen
  uploads: [], // this visit's uploads: {id, name, progress, phase, message, record}
  live: null, // the realtime subscription (a function that ends it), or null
  offline: false,
  view: "", // "signin" | "home" | "record"
  record: null, // the recording on screen: {id, poll, segments, ...}
  recording: null, // a voice note being recorded
  notice: "", // said once on the next sign-in screen (a password just reset)
};

// The newest heard of each recording, from realtime events and reads (latest.js).
const latest = createLatest();

const main = () => document.getElementById("main");

// --- small DOM helpers ---------------------------------------------------------------------

function h(tag, attrs, ...children) {
  const el = document.createElement(tag);
  for (const [name, value] of Object.entries(attrs || {})) {
    if (value === null || value === undefined || value === false) continue;
    if (name.startsWith("on")) el.addEventListener(name.slice(2), value);
    else if (name === "class") el.className = value;
    else if (name in el && typeof value !== "string") el[name] = value;
    else el.setAttribute(name, value === true ? "" : value);
  }
  for (const child of children.flat()) {
    if (child === null || child === undefined || child === false) continue;
    el.append(child instanceof Node ? child : document.createTextNode(String(child)));
  }
  return el;
}

function toast(words) {
  const box = document.getElementById("toast");
  box.textContent = words;
  box.classList.add("shown");
  clearTimeout(toast.timer);
  toast.timer = setTimeout(() => box.classList.remove("shown"), 6000);
}

function percent(p) {
  return Math.round(Math.min(Math.max(p, 0), 1) * 100);
}

function stamp(seconds) {
  const s = Math.max(0, Math.floor(seconds));
  const hh = Math.floor(s / 3600);
  const mm = String(Math.floor((s % 3600) / 60)).padStart(2, "0");
  const ss = String(s % 60).padStart(2, "0");
  return (hh > 0 ? hh + ":" : "") + mm + ":" + ss;
}

// --- words for what the server says --------------------------------------------------------

function activityWords(poll) {
  return t("activity." + poll.activity) === "activity." + poll.activity ? poll.status : t("activity." + poll.activity);
}

function haltWords(code) {
  return i18n.DICTS.en["halt." + code] ? t("halt." + code) : t("halt.other", { code });
}

// A halt in words, and for over_quota what to do: resume now, from when the day's audio allows it, or never.
function haltText(poll) {
  const words = haltWords(poll.halt_code);
  if (poll.halt_code !== "over_quota") return words;
  if (poll.resumable) return words + " " + t("quota.resumeNow");
  if (poll.resumable_at) return words + " " + t("quota.resumeAt", { when: i18n.dateTime(poll.resumable_at) });
  return words + " " + t("quota.never");
}

// A halt that becomes resumable when the day's audio quota allows it: the view is read again then
// (the earliest such time among the recordings on screen), so its Resume button appears.
let resumableTimer = 0;
function watchResumable(polls) {
  clearTimeout(resumableTimer);
  const times = polls.filter((p) => p && p.halted && !p.resumable && p.resumable_at)
    .map((p) => Date.parse(p.resumable_at)).filter((at) => Number.isFinite(at));
  if (!times.length) return;
  const wait = Math.min(Math.max(Math.min(...times) - Date.now() + 1000, 1000), 24 * 3600 * 1000 + 60000);
  resumableTimer = setTimeout(refreshView, wait);
}

function refusalWords(err, name) {
  const code = err && err.code;
  if (code === "network") return t("error.network");
  if (["too_many_uploads", "too_many_waiting", "too_much_audio", "too_many_requests", "too_many_failed_logins"]
    .includes(code)) {
    return t("error." + code, { when: i18n.when(err.retryAfter || 60) });
  }
  if (code === "too_large") {
    return t("error.too_large", { name, limit: i18n.bytes(state.options ? state.options.max_upload_bytes : 0) });
  }
  if (code === "weak_password") return t("error.weak_password", passwordLength());
  if (i18n.DICTS.en["error." + code]) return t("error." + code, { name });
  return t("error.other", { message: (err && err.message) || code });
}

// A 401 anywhere: the session ended (token expired or the account changed): back to sign-in.
function handleRefusal(err, name) {
  if (err && err.status === 401) {
    signOut(t("error.unauthorized"));
    return null;
  }
  return refusalWords(err, name);
}

// --- routing -------------------------------------------------------------------------------

function signedIn() {
  const who = api.pb.authStore.record;
  return api.pb.authStore.isValid && who && who.collectionName === "users";
}

let refreshed = false;
function route() {
  renderHeader();
  const hash = window.location.hash;
  // The reset mail's link works signed in or not (the token says whose password it is).
  const reset = /^#\/reset\/([A-Za-z0-9._-]+)$/.exec(hash);
  if (reset) return renderReset(reset[1]);
  if (!signedIn()) return hash === "#/forgot" ? renderForgot() : renderSignIn();
  if (!refreshed) {
    // Once a visit: a fresh token (the session goes on), or, for an account gone or changed, the sign-in.
    refreshed = true;
    api.pb.collection("users").authRefresh().catch((err) => {
      if (err && (err.status === 401 || err.status === 403 || err.status === 404)) signOut(t("error.unauthorized"));
    });
  }
  ensureLive();
  if (hash === "#/password") return renderPassword();
  const m = /^#\/r\/([A-Za-z0-9]+)$/.exec(hash);
  if (m) return renderRecord(m[1]);
  return renderHome();
}

function renderHeader() {
  document.documentElement.lang = i18n.lang();
  document.title = "transcriber";
  const switcher = document.getElementById("lang-switch");
  switcher.textContent = i18n.DICTS[i18n.other()]["lang.name"];
  switcher.lang = i18n.other();
  const out = document.getElementById("sign-out");
  out.textContent = t("signout");
  out.hidden = !signedIn();
  const password = document.getElementById("password-link");
  password.textContent = t("password.link");
  password.hidden = !signedIn();
  document.getElementById("who").textContent = signedIn() ? api.pb.authStore.record.email || "" : "";
}

async function signOut(message) {
  cancelRecording();
  if (state.live) {
    const end = state.live;
    state.live = null;
    await Promise.resolve(typeof end === "function" ? end() : null).catch(() => {});
  }
  api.pb.realtime.unsubscribe().catch(() => {});
  api.pb.authStore.clear();
  latest.forget(); // nothing of this sender's recordings stays in the page
  refreshed = false;
  state.list = null;
  state.record = null;
  state.uploads = [];
  if (window.location.hash !== "#/") window.history.replaceState(null, "", "#/");
  route();
  if (message) toast(message);
}

// --- live updates (README, "realtime status") ----------------------------------------------

async function ensureLive() {
  if (state.live) return;
  state.live = "starting";
  try {
    const stopStatus = await api.pb.collection("record_status").subscribe("*", (e) => {
      if (latest.hear(e.record.poll, e.record.seq)) onStatus(e.record.poll);
    });
    const stopConnect = await api.pb.realtime.subscribe("PB_CONNECT", () => {
      // Back after a break: what changed meanwhile is read once.
      if (state.offline) {
        state.offline = false;
        latest.forget();
        showLive();
        refreshView();
      }
    });
    api.pb.realtime.onDisconnect = (subs) => {
      if (subs && subs.length) {
        state.offline = true;
        showLive();
      }
    };
    const stop = async () => {
      await stopStatus();
      await stopConnect();
    };
    if (state.live !== "starting") return stop(); // signed out meanwhile
    state.live = stop;
    showLive();
    // The view was first read while the stream opened: a change between that read and now was
    // told to no one. Read once more; from here on every change is heard.
    refreshView();
  } catch (_) {
    if (state.live === "starting") state.live = null;
  }
}

// The stream again under the current token (a password change voids the one it was opened with).
async function restartLive() {
  const end = state.live;
  state.live = null;
  if (typeof end === "function") await Promise.resolve(end()).catch(() => {});
  ensureLive();
}

function showLive() {
  const mark = document.getElementById("live");
  if (!mark) return;
  mark.textContent = state.offline ? t("list.offline") : t("list.live");
  mark.classList.toggle("off", state.offline);
}

function refreshView() {
  if (state.view === "home") loadList();
  if (state.view === "record" && state.record) refreshRecord(state.record.id);
}

let refetch = 0;
function onStatus(poll) {
  if (!poll || !poll.id) return;
  if (state.view === "home" && state.list) {
    const at = state.list.items.findIndex((item) => item.id === poll.id);
    if (at >= 0) {
      state.list.items[at] = poll;
      const row = document.querySelector(`li.record[data-id="${poll.id}"]`);
      if (row) row.replaceWith(recordRow(poll));
    } else {
      // Not on this page (a new upload, or a page that moved): read the page again, once.
      clearTimeout(refetch);
      refetch = setTimeout(loadList, 200);
    }
  }
  if (state.view === "record" && state.record && state.record.id === poll.id) {
    state.record.poll = Object.assign({}, state.record.poll, poll);
    showRecordStatus();
  }
}

// --- sign in -------------------------------------------------------------------------------

function renderSignIn() {
  state.view = "signin";
  const notice = state.notice;
  state.notice = "";
  const error = h("p", { class: "error", role: "alert", id: "signin-error" });
  const submit = h("button", { type: "submit", class: "primary" }, t("signin.submit"));
  // A forgotten password: reset by mail where the owner set mail up, else the owner sets a new one.
  const forgot = h("p", { class: "hint", id: "forgot" });
  const form = h(
    "form",
    { class: "card narrow", "aria-labelledby": "signin-title", novalidate: false },
    h("h1", { id: "signin-title" }, t("signin.title")),
    h("p", { class: "lead" }, t("signin.lead")),
    notice ? h("p", { class: "notice", role: "status", id: "signin-notice" }, notice) : null,
    h("label", { for: "email" }, t("signin.email")),
    h("input", { id: "email", name: "email", type: "email", autocomplete: "username", required: true }),
    h("label", { for: "password" }, t("signin.password")),
    h("input", { id: "password", name: "password", type: "password", autocomplete: "current-password", required: true }),
    error,
    submit,
    forgot,
  );
  loadOptions()
    .then((options) => forgot.replaceChildren(
      options.password_reset ? h("a", { href: "#/forgot", id: "forgot-link" }, t("signin.forgot")) : t("signin.askOwner")))
    .catch(() => {});
  form.addEventListener("submit", async (ev) => {
    ev.preventDefault();
    error.textContent = "";
    submit.disabled = true;
    submit.textContent = t("signin.busy");
    try {
      await api.signIn(form.email.value.trim(), form.password.value);
      route();
    } catch (err) {
      error.textContent = err.status === 400 ? t("signin.failed") : refusalWords(err, "");
      submit.disabled = false;
      submit.textContent = t("signin.submit");
    }
  });
  main().replaceChildren(form);
}

// --- a password forgotten, reset, changed ---------------------------------------------------

// How long a password may be (the options say; PocketBase's defaults until they are read).
function passwordLength() {
  const limits = (state.options && state.options.password_length) || {};
  return { min: limits.min || 8, max: limits.max || 71 };
}

// The fields of a new password, twice; `value()` is it, or "" (and the error said) when the two differ
// or its length is not one the server takes.
function newPasswordFields(error) {
  const hint = h("p", { class: "hint", id: "new-password-hint" }, t("password.hint", passwordLength()));
  loadOptions().then(() => (hint.textContent = t("password.hint", passwordLength()))).catch(() => {});
  const fresh = h("input", { id: "new-password", type: "password", autocomplete: "new-password", required: true,
    "aria-describedby": "new-password-hint" });
  const again = h("input", { id: "repeat-password", type: "password", autocomplete: "new-password", required: true });
  return {
    nodes: [
      h("label", { for: "new-password" }, t("password.new")),
      fresh,
      hint,
      h("label", { for: "repeat-password" }, t("password.repeat")),
      again,
    ],
    value() {
      if (fresh.value !== again.value) {
        error.textContent = t("password.mismatch");
        again.focus();
        return "";
      }
      const limits = passwordLength();
      const chars = Array.from(fresh.value).length;
      if (chars < limits.min || chars > limits.max) {
        error.textContent = t("error.weak_password", limits);
        fresh.focus();
        return "";
      }
      return fresh.value;
    },
  };
}

function busy(button, words) {
  const before = button.textContent;
  button.disabled = true;
  button.textContent = words;
  return () => {
    button.disabled = false;
    button.textContent = before;
  };
}

function renderForgot() {
  state.view = "forgot";
  const error = h("p", { class: "error", role: "alert", id: "forgot-error" });
  const submit = h("button", { type: "submit", class: "primary" }, t("forgot.submit"));
  const back = h("p", {}, h("a", { href: "#/" }, t("forgot.back")));
  const form = h(
    "form",
    { class: "card narrow", "aria-labelledby": "forgot-title" },
    h("h1", { id: "forgot-title" }, t("forgot.title")),
    h("p", { class: "lead" }, t("forgot.lead")),
    h("label", { for: "forgot-email" }, t("signin.email")),
    h("input", { id: "forgot-email", name: "email", type: "email", autocomplete: "username", required: true }),
    error,
    submit,
    back,
  );
  form.addEventListener("submit", async (ev) => {
    ev.preventDefault();
    error.textContent = "";
    const done = busy(submit, t("forgot.busy"));
    try {
      await api.requestReset(form.email.value.trim());
      // The same words whether or not an account has the address: the page tells nobody which exist.
      form.replaceChildren(form.firstChild, h("p", { class: "notice", role: "status", id: "forgot-sent" }, t("forgot.sent")), back);
    } catch (err) {
      error.textContent = refusalWords(err, "");
      done();
    }
  });
  main().replaceChildren(form);
}

function renderReset(token) {
  state.view = "reset";
  const error = h("p", { class: "error", role: "alert", id: "reset-error" });
  const again = h("p", { hidden: true, id: "reset-again" }, h("a", { href: "#/forgot" }, t("reset.again")));
  const fields = newPasswordFields(error);
  const submit = h("button", { type: "submit", class: "primary" }, t("reset.submit"));
  const form = h(
    "form",
    { class: "card narrow", "aria-labelledby": "reset-title" },
    h("h1", { id: "reset-title" }, t("reset.title")),
    h("p", { class: "lead" }, t("reset.lead")),
    fields.nodes,
    error,
    again,
    submit,
  );
  form.addEventListener("submit", async (ev) => {
    ev.preventDefault();
    error.textContent = "";
    const password = fields.value();
    if (!password) return;
    const done = busy(submit, t("password.busy"));
    try {
      await api.confirmReset(token, password);
    } catch (err) {
      const data = err.data || {};
      if (data.password) error.textContent = t("error.weak_password", passwordLength());
      else if (data.token || err.status === 400) {
        error.textContent = t("reset.expired");
        again.hidden = signedIn();
      } else error.textContent = refusalWords(err, "");
      done();
      return;
    }
    // Every session of the account ended with the old password, this browser's too.
    state.notice = t("reset.done");
    if (signedIn()) return signOut();
    window.history.replaceState(null, "", "#/");
    route();
  });
  main().replaceChildren(form);
}

function renderPassword() {
  state.view = "password";
  state.record = null;
  const error = h("p", { class: "error", role: "alert", id: "password-error" });
  const fields = newPasswordFields(error);
  const current = h("input", { id: "current-password", type: "password", autocomplete: "current-password", required: true });
  const submit = h("button", { type: "submit", class: "primary" }, t("password.submit"));
  const form = h(
    "form",
    { class: "card narrow", "aria-labelledby": "password-title" },
    h("h1", { id: "password-title" }, t("password.title")),
    h("label", { for: "current-password" }, t("password.current")),
    current,
    fields.nodes,
    error,
    h("div", { class: "form-actions" }, submit, h("a", { href: "#/", class: "button" }, t("password.cancel"))),
  );
  form.addEventListener("submit", async (ev) => {
    ev.preventDefault();
    error.textContent = "";
    const password = fields.value();
    if (!password) return;
    const done = busy(submit, t("password.busy"));
    try {
      await api.changePassword(current.value, password);
    } catch (err) {
      const words = handleRefusal(err, "");
      if (words !== null) {
        error.textContent = words;
        done();
      }
      return;
    }
    restartLive();
    window.location.hash = "#/";
    toast(t("password.done"));
  });
  main().replaceChildren(form);
  current.focus();
}

// --- the list and the uploads --------------------------------------------------------------

async function loadOptions() {
  if (!state.options) state.options = await api.options();
  return state.options;
}

function renderHome() {
  state.view = "home";
  state.record = null;
  main().replaceChildren(uploadSection(), listSection());
  loadOptions().then(fillLanguages).catch(() => {});
  loadList();
}

function uploadSection() {
  const input = h("input", {
    id: "file-input",
    type: "file",
    multiple: true,
    accept: "audio/*,video/*,.m4a,.mp3,.ogg,.opus,.oga,.webm,.wav,.flac,.aac,.amr,.mp4,.mov,.mkv",
    class: "visually-hidden",
    onchange: () => {
      sendFiles(Array.from(input.files));
      input.value = "";
    },
  });
  const zone = h(
    "div",
    { class: "drop", id: "drop" },
    h("p", { class: "drop-words" }, t("upload.drop")),
    h("p", { class: "drop-or" }, t("upload.or")),
    h(
      "div",
      { class: "drop-actions" },
      h("label", { for: "file-input", class: "button primary" }, t("upload.choose")),
      input,
      recordControls(),
    ),
  );
  const fields = h(
    "div",
    { class: "fields" },
    h(
      "div",
      { class: "field" },
      h("label", { for: "upload-title" }, t("upload.titleLabel")),
      h("input", { id: "upload-title", type: "text", maxlength: "500", "aria-describedby": "upload-title-hint" }),
      h("p", { class: "hint", id: "upload-title-hint" }, t("upload.titleHint")),
    ),
    h(
      "div",
      { class: "field" },
      h("label", { for: "upload-language" }, t("upload.language")),
      h("select", { id: "upload-language" }, h("option", { value: "" }, t("upload.autoLanguage"))),
    ),
  );
  return h(
    "section",
    { class: "card", "aria-labelledby": "upload-heading" },
    h("h1", { id: "upload-heading" }, t("upload.title")),
    zone,
    fields,
    h("ul", { class: "uploads", id: "uploads", "aria-live": "polite" }, state.uploads.map(uploadRow)),
  );
}

function fillLanguages(options) {
  const select = document.getElementById("upload-language");
  if (!select || select.options.length > 1) return;
  const named = options.languages.map((code) => ({ code, name: i18n.languageName(code) }));
  named.sort((a, b) => a.name.localeCompare(b.name, i18n.lang()));
  for (const { code, name } of named) select.append(h("option", { value: code }, name));
}

// Files dropped anywhere on the list page are uploaded; elsewhere the browser would open them.
function wireDrops() {
  let depth = 0;
  const zone = () => document.getElementById("drop");
  const carriesFiles = (ev) => Boolean(ev.dataTransfer && Array.from(ev.dataTransfer.types || []).includes("Files"));
  document.addEventListener("dragenter", (ev) => {
    if (!zone() || !carriesFiles(ev)) return;
    ev.preventDefault();
    depth++;
    zone().classList.add("over");
  });
  document.addEventListener("dragleave", (ev) => {
    if (!carriesFiles(ev)) return;
    depth = Math.max(0, depth - 1);
    if (depth === 0 && zone()) zone().classList.remove("over");
  });
  document.addEventListener("dragover", (ev) => {
    if (zone() && carriesFiles(ev)) ev.preventDefault();
  });
  document.addEventListener("drop", (ev) => {
    if (!zone() || !carriesFiles(ev)) return;
    ev.preventDefault();
    depth = 0;
    zone().classList.remove("over");
    const files = Array.from((ev.dataTransfer && ev.dataTransfer.files) || []);
    if (files.length) sendFiles(files);
  });
}

function stem(name) {
  return String(name || "").replace(/\.[A-Za-z0-9]{1,5}$/, "");
}

async function sendFiles(files, fixedTitle) {
  const titleBox = document.getElementById("upload-title");
  const typed = titleBox ? titleBox.value.trim() : "";
  const languageBox = document.getElementById("upload-language");
  const language = languageBox ? languageBox.value : "";
  const options = await loadOptions().catch(() => null);
  const jobs = files.map((file) => {
    const title = fixedTitle || (files.length === 1 && typed ? typed : typed ? typed + " — " + stem(file.name) : stem(file.name));
    return { id: "u" + Math.random().toString(36).slice(2), name: file.name, progress: 0, phase: "sending", file, title };
  });
  state.uploads.unshift(...jobs);
  if (titleBox) titleBox.value = "";
  redrawUploads();
  for (const job of jobs) {
    if (options && job.file.size > options.max_upload_bytes) {
      finish(job, "refused", refusalWords({ code: "too_large" }, job.name));
      continue;
    }
    try {
      const made = await api.upload(job.file, { title: job.title, language }, (p) => {
        job.progress = p;
        job.phase = p >= 1 ? "checking" : "sending";
        redrawUpload(job);
      });
      job.record = made;
      finish(job, "done", t("upload.sent"));
      if (state.view === "home") loadList();
    } catch (err) {
      const words = handleRefusal(err, job.name);
      if (words === null) return;
      finish(job, "refused", words);
    }
  }
}

function finish(job, phase, message) {
  job.phase = phase;
  job.message = message;
  job.file = null;
  redrawUpload(job);
}

function redrawUploads() {
  const list = document.getElementById("uploads");
  if (list) list.replaceChildren(...state.uploads.map(uploadRow));
}

function redrawUpload(job) {
  const row = document.querySelector(`li.upload[data-job="${job.id}"]`);
  if (row) row.replaceWith(uploadRow(job));
}

function uploadRow(job) {
  const dismiss = h("button", {
    type: "button",
    class: "link",
    onclick: () => {
      state.uploads = state.uploads.filter((j) => j !== job);
      redrawUploads();
    },
  }, t("upload.dismiss"));
  const busy = job.phase === "sending" || job.phase === "checking";
  return h(
    "li",
    { class: "upload " + job.phase, "data-job": job.id, "data-phase": job.phase },
    h("span", { class: "upload-name" }, job.name),
    busy
      ? h("progress", { max: "1", value: String(job.progress), "aria-label": t("upload.sending", { percent: percent(job.progress) }) })
      : null,
    h(
      "span",
      { class: "upload-state", role: job.phase === "refused" ? "alert" : null },
      job.phase === "sending"
        ? t("upload.sending", { percent: percent(job.progress) })
        : job.phase === "checking"
          ? t("upload.checking")
          : job.message,
    ),
    job.phase === "done" && job.record ? h("a", { href: "#/r/" + job.record.id }, t("list.open")) : null,
    busy ? null : dismiss,
  );
}

// A voice note: record, then stop (sent like a file) or discard.
function recordControls() {
  const box = h("div", { class: "recorder", id: "recorder" });
  drawRecorder(box);
  return box;
}

function drawRecorder(box) {
  box = box || document.getElementById("recorder");
  if (!box) return;
  if (!state.recording) {
    box.replaceChildren(h("button", { type: "button", id: "record-start", onclick: startRecording }, t("upload.record")));
    return;
  }
  const elapsed = Math.floor((Date.now() - state.recording.started) / 1000);
  box.replaceChildren(
    h("span", { class: "recording", role: "timer" }, t("record.recording", { time: stamp(elapsed) })),
    h("button", { type: "button", class: "primary", id: "record-stop", onclick: stopRecording }, t("record.stop")),
    h("button", { type: "button", id: "record-cancel", onclick: cancelRecording }, t("record.cancel")),
  );
}

async function startRecording() {
  if (!recorder.supported()) return toast(t("record.unsupported"));
  try {
    state.recording = await recorder.start();
  } catch (_) {
    return toast(t("record.denied"));
  }
  drawRecorder();
  state.recordingTimer = setInterval(() => drawRecorder(), 1000);
}

async function stopRecording() {
  const rec = state.recording;
  if (!rec) return;
  clearInterval(state.recordingTimer);
  state.recording = null;
  drawRecorder();
  const when = new Intl.DateTimeFormat(i18n.lang(), { dateStyle: "medium", timeStyle: "short" }).format(new Date());
  const name = t("record.name", { when });
  const file = await rec.stop(name.replace(/[\\/:*?"<>|]/g, "-"));
  const typed = document.getElementById("upload-title");
  sendFiles([file], typed && typed.value.trim() ? typed.value.trim() : name);
}

function cancelRecording() {
  if (!state.recording) return;
  clearInterval(state.recordingTimer);
  state.recording.cancel();
  state.recording = null;
  drawRecorder();
}

function listSection() {
  return h(
    "section",
    { class: "card", "aria-labelledby": "list-heading" },
    h(
      "div",
      { class: "section-head" },
      h("h2", { id: "list-heading" }, t("list.title")),
      h("span", { class: "live", id: "live" }, state.offline ? t("list.offline") : t("list.live")),
    ),
    h("ul", { class: "records", id: "records", "aria-busy": "true" }),
    h("nav", { class: "pager", id: "pager", "aria-label": t("list.title") }),
  );
}

let listToken = 0;
async function loadList() {
  const mine = ++listToken;
  const mark = latest.begin();
  let page;
  try {
    page = await api.list(state.page, PER_PAGE);
  } catch (err) {
    const words = handleRefusal(err, "");
    if (words) toast(words);
    return;
  }
  if (mine !== listToken || state.view !== "home") return;
  if (page.items.length === 0 && state.page > 1) {
    state.page = Math.max(1, page.totalPages);
    return loadList();
  }
  page.items = page.items.map((poll) => latest.settle(poll, mark));
  state.list = page;
  const list = document.getElementById("records");
  list.replaceChildren(...page.items.map(recordRow));
  list.setAttribute("aria-busy", "false");
  if (page.items.length === 0) list.append(h("li", { class: "empty" }, t("list.empty")));
  drawPager(page);
  watchResumable(page.items);
}

function drawPager(page) {
  const pager = document.getElementById("pager");
  if (!pager) return;
  pager.hidden = page.totalPages <= 1;
  const first = page.totalItems === 0 ? 0 : (page.page - 1) * page.perPage + 1;
  const last = Math.min(page.page * page.perPage, page.totalItems);
  const go = (to) => () => {
    state.page = to;
    loadList();
  };
  pager.replaceChildren(
    h("button", { type: "button", disabled: page.page <= 1, onclick: go(page.page - 1) }, t("list.newer")),
    h("span", { class: "range" }, t("list.range", {
      first: i18n.number(first), last: i18n.number(last), total: i18n.number(page.totalItems),
    })),
    h("button", { type: "button", disabled: page.page >= page.totalPages, onclick: go(page.page + 1) }, t("list.older")),
  );
}

function statusBadge(poll) {
  return h("span", { class: "badge", "data-activity": poll.activity }, activityWords(poll));
}

function progressBar(poll) {
  if (poll.progress === null || poll.progress === undefined || poll.halted || poll.status === "done") return null;
  const pct = percent(poll.progress);
  return h(
    "span",
    { class: "progress" },
    h("progress", { max: "100", value: String(pct), "aria-label": t("record.progress", { percent: pct }) }),
    h("span", { class: "pct" }, pct + "%"),
  );
}

function resumeButton(poll) {
  if (!poll.resumable) return null;
  return h("button", { type: "button", class: "resume", onclick: (ev) => resumeRecording(poll.id, ev.currentTarget) },
    t("record.resume"));
}

async function resumeRecording(id, button) {
  if (button) button.disabled = true;
  try {
    const poll = await latest.read(() => api.resume(id));
    toast(t("record.resumed"));
    onStatus(poll);
  } catch (err) {
    const words = handleRefusal(err, "");
    if (words) toast(words);
    if (button) button.disabled = false;
  }
}

function recordRow(poll) {
  const title = poll.title || t("list.untitled");
  const meta = [i18n.dateTime(poll.created)];
  if (poll.language) meta.push(i18n.languageName(poll.language));
  return h(
    "li",
    { class: "record", "data-id": poll.id, "data-status": poll.status, "data-activity": poll.activity },
    h("div", { class: "record-main" },
      h("a", { class: "record-title", href: "#/r/" + poll.id }, title),
      h("span", { class: "meta" }, meta.join(" · "))),
    h("div", { class: "record-state" }, statusBadge(poll), progressBar(poll)),
    poll.halted
      ? h("div", { class: "halt" }, h("span", {}, haltText(poll)), resumeButton(poll))
      : null,
  );
}

// --- one recording -------------------------------------------------------------------------

async function renderRecord(id) {
  state.view = "record";
  state.record = { id, poll: null, segments: null, loading: false };
  main().replaceChildren(
    h("p", {}, h("a", { href: "#/", class: "back" }, "← " + t("record.back"))),
    h("div", { id: "record-head" }),
    h("div", { id: "record-status" }),
    h("div", { id: "record-audio" }),
    h("div", { id: "record-body" }),
  );
  await refreshRecord(id);
}

let recordToken = 0;
async function refreshRecord(id) {
  const mine = ++recordToken; // of two reads under way, the later one is shown
  let poll;
  try {
    poll = await latest.read(() => api.poll(id));
  } catch (err) {
    if (err.status === 404) {
      main().replaceChildren(
        h("p", {}, h("a", { href: "#/", class: "back" }, "← " + t("record.back"))),
        h("h1", {}, t("record.notFound")),
      );
      return;
    }
    const words = handleRefusal(err, "");
    if (words) toast(words);
    return;
  }
  if (mine !== recordToken || !state.record || state.record.id !== id) return;
  state.record.poll = poll;
  drawRecordHead();
  showRecordStatus();
}

function drawRecordHead(editing) {
  const rec = state.record;
  const head = document.getElementById("record-head");
  if (!head || !rec || !rec.poll) return;
  const poll = rec.poll;
  if (editing) {
    const input = h("input", { id: "rename-input", type: "text", maxlength: "500", value: poll.title });
    const form = h(
      "form",
      { class: "rename" },
      h("label", { for: "rename-input" }, t("record.renameLabel")),
      input,
      h("button", { type: "submit", class: "primary" }, t("record.save")),
      h("button", { type: "button", onclick: () => drawRecordHead(false) }, t("record.cancelEdit")),
    );
    form.addEventListener("submit", async (ev) => {
      ev.preventDefault();
      try {
        rec.poll = Object.assign(rec.poll, await latest.read(() => api.rename(rec.id, input.value)));
        drawRecordHead(false);
      } catch (err) {
        const words = handleRefusal(err, "");
        if (words) toast(words);
      }
    });
    head.replaceChildren(form);
    input.focus();
    return;
  }
  document.title = (poll.title || t("list.untitled")) + " — transcriber";
  const meta = [t("record.uploaded", { when: i18n.dateTime(poll.created) })];
  if (poll.language) meta.push(i18n.languageName(poll.language));
  head.replaceChildren(
    h("div", { class: "title-row" },
      h("h1", { id: "record-title" }, poll.title || t("list.untitled")),
      h("button", { type: "button", class: "link", id: "rename", onclick: () => drawRecordHead(true) }, t("record.rename"))),
    h("p", { class: "meta" }, meta.join(" · ")),
  );
}

function showRecordStatus() {
  const rec = state.record;
  const box = document.getElementById("record-status");
  if (!box || !rec || !rec.poll) return;
  const poll = rec.poll;
  const title = document.getElementById("record-title");
  if (title && title.textContent !== (poll.title || t("list.untitled"))) drawRecordHead(false);
  if (poll.status === "done" && !poll.halted) {
    box.replaceChildren();
    if (!rec.segments && !rec.loading) loadTranscript();
    // A brief written (or edited) while the transcript is open: only its card is drawn again.
    else if (rec.segments && !rec.loading && (poll.brief || "") !== (rec.brief || "")) refreshBrief();
    return;
  }
  const parts = [h("div", { class: "record-state" }, statusBadge(poll), progressBar(poll))];
  if (poll.halted) {
    const more = poll.resumable && poll.halt_code !== "over_quota" ? " " + t("halt.canResume") : "";
    parts.push(h("p", { class: "halt" }, haltText(poll), more));
    parts.push(resumeButton(poll));
  } else {
    parts.push(h("p", { class: "hint" }, t("record.waitingText")));
  }
  box.replaceChildren(h("div", { class: "card", id: "status-card" }, ...parts));
  watchResumable([poll]);
  showRecordAudio();
}

// --- the audio of one recording (the poll's `playback`) -------------------------------------

// What the page shows of the audio: "player" (the original plays, or its playable copy is made),
// or, where a browser cannot play the upload and there is no copy, the words for why.
function audioKind(poll) {
  if (poll.playback === "pending") return poll.halted ? "audio.pendingHalted" : "audio.pending";
  if (poll.playback === "none") return "audio.none";
  return "player";
}

// While the recording is being transcribed: its audio, or why it cannot be played yet. Drawn again
// only when that changes, so a status update never interrupts what is playing; the transcript's
// view takes the player over (loadTranscript → drawTranscript).
function showRecordAudio() {
  const rec = state.record;
  const box = document.getElementById("record-audio");
  if (!box || !rec || !rec.poll || (rec.poll.status === "done" && !rec.poll.halted)) return;
  const kind = audioKind(rec.poll);
  if (rec.audioShown === kind) return;
  rec.audioShown = kind;
  const parts = kind === "player" ? playerOf(rec) : [audioNote(kind)];
  box.replaceChildren(h("section", { class: "card audio-card", id: "audio-card", "aria-label": t("player.label") }, ...parts));
}

function audioNote(kind) {
  return h("p", { class: "hint", id: "audio-note", role: "status" }, t(kind));
}

// The open recording's JSON export, or null (a refusal said in words unless `quiet`, or the
// sender moved on to another recording meanwhile).
async function fetchExport(quiet) {
  const rec = state.record;
  rec.loading = true;
  let body = null;
  try {
    body = await api.transcriptJson(rec.id);
  } catch (err) {
    const words = quiet ? "" : handleRefusal(err, "");
    if (words) toast(words);
  }
  rec.loading = false;
  return state.record === rec ? body : null;
}

async function loadTranscript() {
  const rec = state.record;
  const body = await fetchExport(false);
  if (!body) return;
  rec.segments = cleanSegments(body.segments);
  rec.text = body.text || "";
  takeBrief(rec, body);
  drawTranscript();
}

async function refreshBrief() {
  const rec = state.record;
  const body = await fetchExport(true);
  if (!body) return;
  takeBrief(rec, body);
  const card = briefCard(rec);
  const old = document.getElementById("brief");
  if (old && card) old.replaceWith(card);
  else if (old) old.remove();
  else if (card) document.querySelector(".transcript-layout .right")?.prepend(card);
}

function takeBrief(rec, body) {
  rec.brief = typeof body.brief === "string" ? body.brief : "";
  rec.quotes = Array.isArray(body.quotes) ? body.quotes : [];
  rec.topics = Array.isArray(body.topics) ? body.topics.filter((x) => typeof x === "string") : [];
}

// The segments as the timed exports see them: in time order, none empty, every time finite.
function cleanSegments(segs) {
  const out = [];
  for (const s of Array.isArray(segs) ? segs : []) {
    const text = String((s && s.text) || "").split(/\s+/).filter(Boolean).join(" ");
    if (!text) continue;
    const start = Number.isFinite(Number(s.start)) ? Math.max(0, Number(s.start)) : out.length ? out[out.length - 1].end : 0;
    const end = Number.isFinite(Number(s.end)) ? Math.max(start, Number(s.end)) : start;
    out.push({ start, end, text, speaker: typeof s.speaker === "string" && s.speaker.trim() ? s.speaker.trim() : null });
  }
  return out.sort((a, b) => a.start - b.start);
}

function drawTranscript() {
  const rec = state.record;
  const body = document.getElementById("record-body");
  if (!body) return;
  const kind = audioKind(rec.poll);
  const player = kind === "player" ? playerOf(rec) : [audioNote(kind)];

  const speakers = [];
  const lines = rec.segments.map((seg, i) => {
    let speaker = null;
    if (seg.speaker) {
      if (!speakers.includes(seg.speaker)) speakers.push(seg.speaker);
      speaker = h("span", { class: "speaker s" + (speakers.indexOf(seg.speaker) % 6) }, seg.speaker);
    }
    return h(
      "li",
      { class: "line", "data-index": String(i), "data-start": String(seg.start) },
      h("button", { type: "button", class: "line-button", title: t("transcript.playFrom", { time: stamp(seg.start) }),
        onclick: () => playFrom(i) },
      h("span", { class: "time" }, stamp(seg.start)),
      speaker,
      h("span", { class: "text" }, seg.text)),
    );
  });
  const list = rec.segments.length
    ? h("ol", { class: "lines", id: "lines" }, lines)
    : h("div", { class: "plain", id: "lines" },
      rec.text ? rec.text.split(/\n{2,}/).map((p) => h("p", {}, p)) : h("p", {}, t("record.noSpeech")));
  const count = h("p", { class: "hint", id: "search-count", role: "status" });
  const search = h("input", {
    id: "search",
    type: "search",
    placeholder: t("transcript.search"),
    "aria-label": t("transcript.search"),
    oninput: () => filterLines(search.value, count),
  });
  const downloads = h("div", { class: "downloads", role: "group", "aria-labelledby": "downloads-label" },
    h("span", { id: "downloads-label" }, t("transcript.download")),
    FORMATS.map(({ format, label }) =>
      h("button", { type: "button", class: "download", "data-format": format, onclick: () => download(format) }, label)));
  // The player stays in sight while the transcript scrolls: beside it on a wide screen, above it on a phone.
  body.replaceChildren(
    h(
      "div",
      { class: "transcript-layout" },
      h("div", { class: "left" },
        h("aside", { class: "side card", "aria-label": t("player.label") }, ...player),
        h("div", { class: "tools card" }, downloads, rec.segments.length ? search : null, count)),
      h("div", { class: "right" },
        briefCard(rec),
        h("section", { class: "card transcript", "aria-labelledby": "transcript-heading" },
          h("h2", { id: "transcript-heading" }, t("transcript.title")), list)),
    ),
  );
  document.getElementById("record-audio")?.replaceChildren(); // its player, if any, moved into the aside
}

// The recording's player and its note, made once for the recording on screen (kept while its page is,
// so the transcript's view takes over the one the sender may be listening to).
function playerOf(rec) {
  if (rec.player) return rec.player;
  const audio = h("audio", { id: "player", controls: true, preload: "metadata", "aria-label": t("player.label") });
  const note = h("p", { class: "hint", id: "player-note", role: "status" });
  rec.audio = audio;
  rec.player = [audio, note];
  setAudioSource(audio, rec.id, 0, false);
  audio.addEventListener("error", () => audioFailed(audio, rec.id, note));
  // Played again after a long pause: a fresh token first, or the player's next request is refused.
  audio.addEventListener("play", () => {
    if (rec.tokenAt && Date.now() - rec.tokenAt > TOKEN_FRESH_MS && state.record === rec) {
      setAudioSource(audio, rec.id, audio.currentTime, true);
    }
  });
  audio.addEventListener("timeupdate", () => followPlayback(audio.currentTime));
  return rec.player;
}

// The brief and topics, when the service wrote them: each sentence with the quote
// that grounds it, a button that plays the recording from the quote's time.
function briefCard(rec) {
  if (!rec.brief && rec.topics.length === 0) return null;
  const sentences = rec.quotes.length
    ? h("ul", { class: "brief-lines" }, rec.quotes.map((q) => {
      const start = Number.isFinite(Number(q.start)) ? Math.max(0, Number(q.start)) : 0;
      return h("li", {},
        h("span", { class: "sentence" }, String(q.sentence || "")),
        " ",
        h("button", { type: "button", class: "quote", title: t("transcript.playFrom", { time: stamp(start) }),
          onclick: () => playAt(start) },
        h("span", { class: "time" }, stamp(start)), " «" + String(q.quote || "") + "»"));
    }))
    : rec.brief ? h("p", {}, rec.brief) : null;
  const topics = rec.topics.length
    ? h("ul", { class: "topics", "aria-label": t("brief.topics") }, rec.topics.map((name) => h("li", { class: "topic" }, name)))
    : null;
  return h("section", { class: "card brief", id: "brief", "aria-labelledby": "brief-heading" },
    h("h2", { id: "brief-heading" }, t("brief.title")), sentences, topics,
    h("p", { class: "hint" }, t("brief.hint")));
}

async function setAudioSource(audio, id, at, play) {
  let token;
  try {
    token = await api.fileToken();
  } catch (err) {
    handleRefusal(err, "");
    return;
  }
  const rec = state.record;
  if (!rec || rec.id !== id) return;
  rec.tokenAt = Date.now();
  audio.src = api.audioUrl(id, token);
  if (at > 0 || play) {
    await new Promise((resolve) => audio.addEventListener("loadedmetadata", resolve, { once: true }));
    audio.currentTime = at;
    if (play) audio.play().catch(() => {});
  }
}

// A request the player made after its token ran out is refused: a fresh token, the same place.
function audioFailed(audio, id, note) {
  const rec = state.record;
  if (!rec || rec.id !== id) return;
  const now = Date.now();
  rec.failures = (rec.failures || []).filter((at) => now - at < 60000);
  if (rec.failures.length >= 2) {
    note.textContent = t("player.retry");
    return;
  }
  rec.failures.push(now);
  setAudioSource(audio, id, rec.lastTime || 0, rec.wasPlaying || false);
}

async function playFrom(index) {
  const rec = state.record;
  const seg = rec && rec.segments[index];
  if (seg) await playAt(seg.start);
}

async function playAt(seconds) {
  const rec = state.record;
  if (!rec || !rec.audio) return;
  const audio = rec.audio;
  if (!rec.tokenAt || Date.now() - rec.tokenAt > TOKEN_FRESH_MS) {
    await setAudioSource(audio, rec.id, seconds, true);
  } else {
    audio.currentTime = seconds;
    audio.play().catch(() => {});
  }
  followPlayback(seconds);
}

function followPlayback(time) {
  const rec = state.record;
  if (!rec || !rec.segments || !rec.segments.length) return;
  if (rec.audio) {
    rec.lastTime = rec.audio.currentTime;
    rec.wasPlaying = !rec.audio.paused;
  }
  // The last segment that starts at or before `time`.
  let lo = 0;
  let hi = rec.segments.length - 1;
  let found = -1;
  while (lo <= hi) {
    const mid = (lo + hi) >> 1;
    if (rec.segments[mid].start <= time + 0.05) {
      found = mid;
      lo = mid + 1;
    } else hi = mid - 1;
  }
  if (found === rec.current) return;
  rec.current = found;
  for (const li of document.querySelectorAll("#lines li.current")) {
    li.classList.remove("current");
    li.removeAttribute("aria-current");
  }
  const li = document.querySelector(`#lines li[data-index="${found}"]`);
  if (li) {
    li.classList.add("current");
    li.setAttribute("aria-current", "true");
    if (rec.audio && !rec.audio.paused) li.scrollIntoView({ block: "nearest", behavior: "smooth" });
  }
}

function filterLines(query, count) {
  const q = query.trim().toLocaleLowerCase();
  let shown = 0;
  for (const li of document.querySelectorAll("#lines li.line")) {
    const seg = state.record.segments[Number(li.dataset.index)];
    const text = li.querySelector(".text");
    const hit = !q || (seg.text + " " + (seg.speaker || "")).toLocaleLowerCase().includes(q);
    li.hidden = !hit;
    if (hit) shown++;
    text.replaceChildren(...highlight(seg.text, q));
  }
  count.textContent = q ? (shown ? t("transcript.matches", { count: shown }) : t("transcript.noMatches")) : "";
}

function highlight(text, q) {
  if (!q) return [text];
  const out = [];
  const lower = text.toLocaleLowerCase();
  let at = 0;
  for (let i = lower.indexOf(q); i >= 0; i = lower.indexOf(q, i + q.length)) {
    out.push(text.slice(at, i), h("mark", {}, text.slice(i, i + q.length)));
    at = i + q.length;
  }
  out.push(text.slice(at));
  return out;
}

async function download(format) {
  const rec = state.record;
  try {
    const blob = await api.exportBlob(rec.id, format);
    const base = (rec.poll && rec.poll.title ? rec.poll.title : rec.id).replace(/[\\/:*?"<>|\n\r\t]+/g, " ").trim();
    const a = h("a", { href: URL.createObjectURL(blob), download: (base || rec.id).slice(0, 120) + "." + format });
    document.body.append(a);
    a.click();
    a.remove();
    setTimeout(() => URL.revokeObjectURL(a.href), 10000);
  } catch (err) {
    const words = handleRefusal(err, "");
    if (words) toast(words);
  }
}

// --- start ---------------------------------------------------------------------------------

function boot() {
  i18n.setLang(i18n.lang());
  document.getElementById("lang-switch").addEventListener("click", () => {
    i18n.setLang(i18n.other());
    const focus = document.activeElement && document.activeElement.id;
    route();
    if (focus) document.getElementById(focus)?.focus();
  });
  document.getElementById("sign-out").addEventListener("click", () => signOut());
  window.addEventListener("hashchange", () => {
    route();
    main().focus();
  });
  wireDrops();
  route();
}

boot();

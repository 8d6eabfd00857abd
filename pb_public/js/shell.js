// What every screen of the sender's page shares: the page's state, the header
// and signing out, the live stream of status changes (README, "realtime
// status"), the options the server announces, and a refusal in words. The
// screens import from here; this module imports no screen: the routes are
// main.js's, and each screen tells the stream what to do for it (`whenLive`).
import * as api from "./api.js";
import { toast } from "./dom.js";
import * as i18n from "./i18n.js";
import { t } from "./i18n.js";
import { createLatest } from "./latest.js";

export const state = {
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
export const latest = createLatest();

export const main = () => document.getElementById("main");

// --- routing (the routes themselves are main.js's) -----------------------------------------

let router = () => {};

export function setRouter(fn) {
  router = fn;
}

// The screen the address names, drawn again.
export function route() {
  router();
}

// --- the account: signed in, the header, signing out ---------------------------------------

export function signedIn() {
  const who = api.pb.authStore.record;
  return api.pb.authStore.isValid && who && who.collectionName === "users";
}

let refreshed = false;
// Once a visit: a fresh token (the session goes on), or, for an account gone or changed, the sign-in.
export function renewOnce() {
  if (refreshed) return;
  refreshed = true;
  api.pb.collection("users").authRefresh().catch((err) => {
    if (err && (err.status === 401 || err.status === 403 || err.status === 404)) signOut(t("error.unauthorized"));
  });
}

export function renderHeader() {
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

// What a screen ends when the sender signs out (a voice note being recorded).
const onSignOutAll = [];
export function onSignOut(fn) {
  onSignOutAll.push(fn);
}

export async function signOut(message) {
  for (const fn of onSignOutAll) fn();
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

// What each view does when the stream speaks: `refresh()` reads it again, `status(poll)` shows one
// recording's change.
const liveViews = {};
export function whenLive(view, handlers) {
  liveViews[view] = handlers;
}

export async function ensureLive() {
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
export async function restartLive() {
  const end = state.live;
  state.live = null;
  if (typeof end === "function") await Promise.resolve(end()).catch(() => {});
  ensureLive();
}

export function showLive() {
  const mark = document.getElementById("live");
  if (!mark) return;
  mark.textContent = state.offline ? t("list.offline") : t("list.live");
  mark.classList.toggle("off", state.offline);
}

export function refreshView() {
  liveViews[state.view]?.refresh();
}

export function onStatus(poll) {
  if (!poll || !poll.id) return;
  liveViews[state.view]?.status(poll);
}

// --- what the server says ------------------------------------------------------------------

export async function loadOptions() {
  if (!state.options) state.options = await api.options();
  return state.options;
}

// How long a password may be: characters, and bytes of UTF-8 as bcrypt counts them (the options
// say; PocketBase's defaults until they are read).
export function passwordLength() {
  const limits = (state.options && state.options.password_length) || {};
  return { min: limits.min || 8, max: limits.max || 71, max_bytes: limits.max_bytes || 72 };
}

// Why `password` is refused here ("" when it is not): its bytes first, then its characters.
export function passwordRefusal(password) {
  const limits = passwordLength();
  const bytes = new TextEncoder().encode(password).length;
  if (bytes > limits.max_bytes) return t("error.password_bytes", { ...limits, bytes });
  const chars = Array.from(password).length;
  return chars < limits.min || chars > limits.max ? t("error.weak_password", limits) : "";
}

export function refusalWords(err, name) {
  const code = err && err.code;
  if (code === "network") return t("error.network");
  if (["too_many_uploads", "too_many_waiting", "too_much_audio", "too_many_requests", "too_many_failed_logins"]
    .includes(code)) {
    return t("error." + code, { when: i18n.when(err.retryAfter || 60) });
  }
  if (code === "too_large") {
    return t("error.too_large", { name, limit: i18n.bytes(state.options ? state.options.max_upload_bytes : 0) });
  }
  if (code === "weak_password") {
    const data = (err && err.data) || {};
    return data.bytes > data.max_bytes ? t("error.password_bytes", data) : t("error.weak_password", passwordLength());
  }
  if (i18n.DICTS.en["error." + code]) return t("error." + code, { name });
  return t("error.other", { message: (err && err.message) || code });
}

// A 401 anywhere: the session ended (token expired or the account changed): back to sign-in.
export function handleRefusal(err, name) {
  if (err && err.status === 401) {
    signOut(t("error.unauthorized"));
    return null;
  }
  return refusalWords(err, name);
}

// A refusal said in a passing message (nothing to say after a 401: the sign-in is on screen).
export function sayRefusal(err) {
  const words = handleRefusal(err, "");
  if (words) toast(words);
}

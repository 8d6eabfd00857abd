// A recording's state as the list's rows and the recording's page both show it:
// the activity's badge, the progress bar with the time left, a halt in words, and the Resume button.
import * as api from "./api.js";
import { h, percent, toast } from "./dom.js";
import { createPaceLog, leftWords, timeLeft } from "./eta.js";
import * as i18n from "./i18n.js";
import { t } from "./i18n.js";
import { latest, onSignOut, onStatus, refreshView, sayRefusal } from "./shell.js";

function activityWords(poll) {
  return t("activity." + poll.activity) === "activity." + poll.activity ? poll.status : t("activity." + poll.activity);
}

function haltWords(code) {
  return i18n.DICTS.en["halt." + code] ? t("halt." + code) : t("halt.other", { code });
}

// A halt in words, and for over_quota what to do: resume now, from when the day's audio allows it, or never.
export function haltText(poll) {
  const words = haltWords(poll.halt_code);
  if (poll.halt_code !== "over_quota") return words;
  if (poll.resumable) return words + " " + t("quota.resumeNow");
  if (poll.resumable_at) return words + " " + t("quota.resumeAt", { when: i18n.dateTime(poll.resumable_at) });
  return words + " " + t("quota.never");
}

// A halt that becomes resumable when the day's audio quota allows it: the view is read again then
// (the earliest such time among the recordings on screen), so its Resume button appears.
let resumableTimer = 0;
export function watchResumable(polls) {
  clearTimeout(resumableTimer);
  const times = polls.filter((p) => p && p.halted && !p.resumable && p.resumable_at)
    .map((p) => Date.parse(p.resumable_at)).filter((at) => Number.isFinite(at));
  if (!times.length) return;
  const wait = Math.min(Math.max(Math.min(...times) - Date.now() + 1000, 1000), 24 * 3600 * 1000 + 60000);
  resumableTimer = setTimeout(refreshView, wait);
}

export function statusBadge(poll) {
  return h("span", { class: "badge", "data-activity": poll.activity }, activityWords(poll));
}

// How each recording's progress moved while the page watched (eta.js), for the time left.
const paces = createPaceLog();
onSignOut(() => paces.forget());
// The time left is said again this often: it shrinks between moves, and goes when they stop.
const ETA_REFRESH_MS = 5000;
let etaTimer = 0;

function sayTimeLeft(el) {
  const seconds = timeLeft(paces.samples(el.dataset.id), Date.now());
  el.textContent = seconds === null ? "" : leftWords(seconds);
  el.hidden = seconds === null;
}

function sayTimesLeft() {
  const shown = document.querySelectorAll(".eta[data-id]");
  shown.forEach(sayTimeLeft);
  if (!shown.length) {
    clearInterval(etaTimer);
    etaTimer = 0;
  }
}

export function progressBar(poll) {
  paces.note(poll, Date.now());
  if (poll.progress === null || poll.progress === undefined || poll.halted || poll.status === "done") return null;
  const pct = percent(poll.progress);
  const eta = h("span", { class: "eta", "data-id": poll.id });
  sayTimeLeft(eta);
  if (!etaTimer) etaTimer = setInterval(sayTimesLeft, ETA_REFRESH_MS);
  return h(
    "span",
    { class: "progress" },
    h("progress", { max: "100", value: String(pct), "aria-label": t("record.progress", { percent: pct }) }),
    h("span", { class: "pct" }, pct + "%"),
    eta,
  );
}

export function resumeButton(poll) {
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
    sayRefusal(err);
    if (button) button.disabled = false;
  }
}

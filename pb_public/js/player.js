// The recording's audio (the poll's `playback`): its player, made once for the recording on screen,
// the file token it plays with (renewed before it runs out), a time played, and the line heard marked.
import * as api from "./api.js";
import { h } from "./dom.js";
import { t } from "./i18n.js";
import { handleRefusal, state } from "./shell.js";

// A file token lives about three minutes; one older than this is renewed before the player needs it.
const TOKEN_FRESH_MS = 150 * 1000;

// What the page shows of the audio: "player" (the original plays, or its playable copy is made),
// or, where a browser cannot play the upload and there is no copy, the words for why.
export function audioKind(poll) {
  if (poll.playback === "pending") return poll.halted ? "audio.pendingHalted" : "audio.pending";
  if (poll.playback === "none") return "audio.none";
  return "player";
}

// While the recording is being transcribed: its audio, or why it cannot be played yet. Drawn again
// only when that changes, so a status update never interrupts what is playing; the transcript's
// view takes the player over (loadTranscript → drawTranscript).
export function showRecordAudio() {
  const rec = state.record;
  const box = document.getElementById("record-audio");
  if (!box || !rec || !rec.poll || (rec.poll.status === "done" && !rec.poll.halted)) return;
  const kind = audioKind(rec.poll);
  if (rec.audioShown === kind) return;
  rec.audioShown = kind;
  const parts = kind === "player" ? playerOf(rec) : [audioNote(kind)];
  box.replaceChildren(h("section", { class: "card audio-card", id: "audio-card", "aria-label": t("player.label") }, ...parts));
}

export function audioNote(kind) {
  return h("p", { class: "hint", id: "audio-note", role: "status" }, t(kind));
}

// The recording's player and its note, made once for the recording on screen (kept while its page is,
// so the transcript's view takes over the one the sender may be listening to).
export function playerOf(rec) {
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

export async function playAt(seconds) {
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
  if (!rec || !rec.cues || !rec.cues.length) return;
  if (rec.audio) {
    rec.lastTime = rec.audio.currentTime;
    rec.wasPlaying = !rec.audio.paused;
  }
  // The last cue that starts at or before `time`.
  let lo = 0;
  let hi = rec.cues.length - 1;
  let found = -1;
  while (lo <= hi) {
    const mid = (lo + hi) >> 1;
    if (rec.cues[mid].start <= time + 0.05) {
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

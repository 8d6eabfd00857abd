// How long a recording's stage has left, estimated on this page from how its progress moved
// while the page watched. The server reports how far the work is (`progress`, 0..1), never how
// fast: the rate is read here from the moves the page saw and the page's own clock, so no clock
// of the server's is compared with the browser's. Everything here is given the time (`at`,
// `now`, in ms): a test drives it with a clock of its own.
import * as i18n from "./i18n.js";

// No estimate until the progress has moved this much (of the whole) over at least this long
// while the page watched: fewer, closer moves give a rate that swings from one to the next.
export const MIN_MOVED = 0.05;
export const MIN_SPAN_MS = 10000;
// The rate is read over about the latest two minutes of moves: a recording's pace changes
// (its speech, the machine's other work), and the estimate follows.
export const WINDOW_MS = 120000;
// Not moving: no move for this long, nor for three of its usual gaps between moves.
export const STALL_MS = 30000;
const STALL_GAPS = 3;

// The seconds left, or null when there is no estimate to give: too little seen yet, the
// progress not moving, or the work done. `samples` are the moves seen, oldest first, each
// `{progress, at}`.
export function timeLeft(samples, now) {
  if (!Array.isArray(samples) || samples.length < 2) return null;
  const last = samples[samples.length - 1];
  let from = 0;
  for (let i = samples.length - 2; i >= 0; i--) {
    if (last.at - samples[i].at >= WINDOW_MS) {
      from = i;
      break;
    }
  }
  const first = samples[from];
  const moved = last.progress - first.progress;
  const span = last.at - first.at;
  if (!(moved >= MIN_MOVED && span >= MIN_SPAN_MS && last.progress < 1)) return null;
  const silent = Math.max(0, now - last.at);
  const gap = span / (samples.length - 1 - from);
  if (silent > Math.max(STALL_MS, STALL_GAPS * gap)) return null;
  const left = ((1 - last.progress) * span) / moved - silent;
  return Math.max(0, left) / 1000;
}

// The estimate in words: under a minute, whole minutes up to ten, then fives, then hours.
export function leftWords(seconds) {
  if (seconds < 60) return i18n.t("eta.underMinute");
  const minutes = seconds / 60;
  const shown = minutes < 10 ? Math.max(1, Math.round(minutes)) : Math.round(minutes / 5) * 5;
  if (shown < 60) return i18n.plural("eta.minutes", shown);
  return i18n.plural("eta.hours", Math.max(1, Math.round(minutes / 60)));
}

// The moves of each recording's progress the page has seen. A move is a rise of the progress
// within one stage doing one thing (its status and activity); a new stage or activity, or a
// progress that went back (work started over), starts the count afresh. The first
// time a recording is seen its progress may have been reached long before: that is no move.
export function createPaceLog() {
  const seen = new Map(); // recording id -> {phase, progress, samples}

  return {
    note(poll, at) {
      if (!poll || !poll.id) return;
      const phase = poll.halted || poll.status === "done" ? "" : poll.status + "/" + poll.activity;
      const progress = typeof poll.progress === "number" && Number.isFinite(poll.progress) ? poll.progress : null;
      const before = seen.get(poll.id);
      if (!before) {
        seen.set(poll.id, { phase, progress, samples: [] });
        return;
      }
      if (before.phase !== phase || progress === null || (before.progress !== null && progress < before.progress)) {
        seen.set(poll.id, { phase, progress, samples: progress === null || !phase ? [] : [{ progress, at }] });
        return;
      }
      if (before.progress === null || progress > before.progress) {
        const samples = before.samples;
        samples.push({ progress, at });
        before.progress = progress;
        // Only the moves `timeLeft` reads are kept: one before its window, and those within.
        while (samples.length > 2 && at - samples[1].at >= WINDOW_MS) samples.shift();
      }
    },
    samples(id) {
      const entry = seen.get(id);
      return entry ? entry.samples.slice() : [];
    },
    // Signed out: nothing of the sender's recordings stays in the page.
    forget() {
      seen.clear();
    },
  };
}

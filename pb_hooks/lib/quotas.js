// H4: per-sender quotas, checked at intake inside the transaction that
// creates the record. The write pool has one connection, so transactions run
// one at a time and a burst of parallel uploads cannot slip past a count.
//
// Settings ([quotas] in the sidecar's settings, passed as environment):
//   uploads_per_hour     recordings accepted from one sender in any hour
//   waiting              recordings not yet finished at once (halted ones excluded)
//   audio_hours_per_day  hours of audio in any 24 hours
// 0 turns a quota off.
//
// Audio is charged when it can first be known, so that a burst cannot spend
// what no count has seen yet: each record's `quota_ms` is reserved at intake
// (the length the container declares, or a guess from its size) and replaced
// at normalize by the decoded length, in a fenced transaction that halts the
// recording `over_quota` when its true length breaks the quota, before any
// recognition. A recording halted before normalize finished (stage
// `uploaded`) holds nothing: resumed, it is measured and checked again.
//
// The day's audio is the audio charged in the last 24 hours, each recording
// counted at `quota_at`: its upload, or the moment its sender resumed it from
// a halt before normalize (so a recording uploaded last week and resumed today
// counts today). A sender resumes an over_quota halt only when its measured
// length fits what is left of the day (`resumeExceeded`), and the resume
// reserves that length at once, so a burst of resumes cannot all fit.
const datetimes = require("./datetimes.js");
const respond = require("./respond.js");
const settings = require("./settings.js");
const stages = require("./stages.js");

const HOUR_MS = 3600 * 1000;
const DAY_MS = 24 * HOUR_MS;
// A waiting recording frees its place when it finishes: no clock says when.
const WAITING_RETRY_S = 60;

function limits() {
  return {
    uploadsPerHour: settings.get("quotas", "uploads_per_hour"),
    waiting: settings.get("quotas", "waiting"),
    audioMsPerDay: Math.round(settings.get("quotas", "audio_hours_per_day") * 3600 * 1000),
  };
}

// When something counted at `atMs` leaves a window of `windowMs`: at most
// the window (a record stamped a moment after `now` was read is not later).
function secondsUntil(atMs, windowMs, now) {
  return Math.min(windowMs / 1000, Math.max(1, Math.ceil((atMs + windowMs - now) / 1000)));
}

// A length in the largest unit that reads well: "2.5 hours", "40 minutes", "12 seconds".
function spell(ms) {
  if (ms >= HOUR_MS) return plural(Math.round(ms / HOUR_MS * 10) / 10, "hour");
  if (ms >= 60000) return plural(Math.round(ms / 60000), "minute");
  return plural(Math.round(ms / 1000), "second");
}

function plural(n, word) {
  return n + " " + word + (n === 1 ? "" : "s");
}

// Whether `owner` may upload a recording of `length` ({ms, declared}: the
// length its header says, or a guess from its size): {reserveMs}, the audio
// to reserve for it, or {over: {code, message, retryAfter}}.
function admit(tx, owner, now, length) {
  const q = limits();
  const over = countExceeded(tx, owner, now, q);
  if (over) return { over: over };
  if (q.audioMsPerDay <= 0) return { reserveMs: length.ms };
  return audio(tx, owner, now, length, q);
}

// What can be refused before a recording is read, so that a sender over a quota
// costs no parsing (nor, with `Expect: 100-continue`, the upload itself): the counts, and a
// day with no audio left (nothing fits it, whatever the recording's length). Null, or why not.
// Read outside the transaction: admit() decides again, inside it.
function beforeReading(tx, owner, now) {
  const q = limits();
  const over = countExceeded(tx, owner, now, q);
  if (over || q.audioMsPerDay <= 0) return over;
  return audio(tx, owner, now, { ms: 1, declared: false }, q).over || null;
}

// The quotas that count recordings: null, or why not.
function countExceeded(tx, owner, now, q) {
  if (q.uploadsPerHour > 0) {
    const recent = tx.findRecordsByFilter("audio_records", "owner = {:owner} && created >= {:since}", "created",
      q.uploadsPerHour, 0, { owner: owner, since: datetimes.dbTime(now - HOUR_MS) });
    if (recent.length >= q.uploadsPerHour) {
      return {
        code: "too_many_uploads",
        message: "You have sent " + plural(q.uploadsPerHour, "recording") + " in the last hour, the most allowed; " +
          "try again later.",
        retryAfter: secondsUntil(datetimes.msOf(recent[0].getString("created")), HOUR_MS, now),
      };
    }
  }
  return waitingExceeded(tx, owner, q);
}

// The quota of recordings waiting at once: null, or why not (a resumed recording waits again too).
function waitingExceeded(tx, owner, q) {
  q = q || limits();
  if (q.waiting > 0) {
    const row = new DynamicModel({ n: 0 });
    tx.db().newQuery("SELECT COUNT(*) AS n FROM audio_records WHERE owner = {:owner} AND state != {:done} " +
      "AND halted_at = ''").bind({ owner: owner, done: stages.DONE }).one(row);
    if (row.n >= q.waiting) {
      return {
        code: "too_many_waiting",
        message: "You have " + plural(row.n, "recording") + " still being transcribed, the most allowed at once; " +
          "upload more when some have finished.",
        retryAfter: WAITING_RETRY_S,
      };
    }
  }
  return null;
}

function audio(tx, owner, now, length, q) {
  const rows = charged(tx, owner, now, "");
  let total = 0;
  for (const r of rows) total += r.ms;
  const room = q.audioMsPerDay - total;
  if (!length.declared && room > 0) {
    // A guess from the size can be far off either way: it reserves at most the
    // room left, and normalize's measure decides.
    return { reserveMs: Math.min(length.ms, room) };
  }
  if (length.declared && length.ms > q.audioMsPerDay) {
    return { over: {
      code: "too_much_audio",
      message: "This recording is " + spell(length.ms) + " long; the limit is " + spell(q.audioMsPerDay) +
        " of audio in 24 hours.",
      retryAfter: DAY_MS / 1000,
    } };
  }
  const need = length.declared ? length.ms : 1;
  if (need <= room) return { reserveMs: length.ms };
  return { over: {
    code: "too_much_audio",
    message: "You have sent " + spell(total) + " of audio in the last 24 hours" +
      (length.declared ? " and this recording is " + spell(length.ms) + " long" : "") +
      "; the limit is " + spell(q.audioMsPerDay) + ".",
    retryAfter: waitFor(rows, room, need, now),
  } };
}

// Seconds until `need` fits: room returns as the oldest of `rows` (oldest
// first) leave the 24-hour window.
function waitFor(rows, room, need, now) {
  let freed = 0;
  let wait = DAY_MS / 1000;
  for (const r of rows) {
    freed += r.ms;
    wait = secondsUntil(r.at, DAY_MS, now);
    if (room + freed >= need) break;
  }
  return wait;
}

// The audio charged to `owner`'s recordings in the 24 hours before `now`
// (oldest first), but `except`'s: [{at, ms}]. A recording halted before its
// normalize finished holds nothing (it is measured again when resumed).
function charged(tx, owner, now, except) {
  const rows = arrayOf(new DynamicModel({ at: 0, ms: 0 }));
  tx.db().newQuery("SELECT quota_at AS at, quota_ms AS ms FROM audio_records WHERE owner = {:owner} " +
    "AND quota_at >= {:since} AND id != {:except} AND NOT (halted_at != '' AND state = {:uploaded}) " +
    "ORDER BY quota_at").bind(
    { owner: owner, since: now - DAY_MS, except: except, uploaded: stages.UPLOADED }).all(rows);
  return rows;
}

// Whether `rec`, halted over_quota, fits its sender's day now: null when it
// does, else why not ({code, message, retryAfter, never}). Its length is the
// one normalize measured (the halt came after that); `never`: it is longer
// than a whole day's quota, and no wait will make it fit.
function resumeExceeded(tx, rec, now) {
  const q = limits();
  if (q.audioMsPerDay <= 0) return null;
  const need = Math.max(rec.getInt("duration_ms"), 1);
  if (need > q.audioMsPerDay) {
    return {
      code: "too_much_audio",
      message: "This recording is " + spell(need) + " long; the limit is " + spell(q.audioMsPerDay) +
        " of audio in 24 hours, so it cannot be resumed unless the owner of the service raises it.",
      retryAfter: DAY_MS / 1000,
      never: true,
    };
  }
  const rows = charged(tx, rec.getString("owner"), now, rec.id);
  let total = 0;
  for (const r of rows) total += r.ms;
  const room = q.audioMsPerDay - total;
  if (need <= room) return null;
  return {
    code: "too_much_audio",
    message: "You have sent " + spell(total) + " of audio in the last 24 hours and this recording is " +
      spell(need) + " long; the limit is " + spell(q.audioMsPerDay) + ".",
    retryAfter: waitFor(rows, room, need, now),
    never: false,
  };
}

// A sender resumes `rec`, halted before its normalize finished: its audio is
// charged to the day of the resume, holding `reserveMs` until normalize
// measures it again (null: what it held before).
function rechargedAt(tx, rec, now, reserveMs) {
  tx.db().newQuery("UPDATE audio_records SET quota_at = {:at}, quota_ms = {:ms} WHERE id = {:id}").bind(
    { id: rec.id, at: now, ms: reserveMs === null ? rec.getInt("quota_ms") : reserveMs }).execute();
}

// Normalize measured `rec`'s decoded length: charged in place of its
// reservation, or, when it breaks its sender's quota, nothing and a reason
// (for the halt). Inside the fenced transaction.
function measured(tx, rec, durationMs, now) {
  const q = limits();
  let over = null;
  if (q.audioMsPerDay > 0) {
    let others = 0;
    for (const r of charged(tx, rec.getString("owner"), now, rec.id)) others += r.ms;
    if (others + durationMs > q.audioMsPerDay) {
      over = "the recording is " + spell(durationMs) + " long and its sender's other recordings of the last 24 hours " +
        "hold " + spell(others) + "; the limit is " + spell(q.audioMsPerDay) + " of audio in 24 hours";
    }
  }
  tx.db().newQuery("UPDATE audio_records SET quota_ms = {:ms} WHERE id = {:id}")
    .bind({ id: rec.id, ms: over ? 0 : durationMs }).execute();
  return over;
}

function refuse(e, over) {
  e.response.header().set("Retry-After", String(over.retryAfter));
  return respond.fail(e, 429, over.code, over.message);
}

module.exports = {
  admit: admit, beforeReading: beforeReading, measured: measured, refuse: refuse, waitingExceeded: waitingExceeded,
  resumeExceeded: resumeExceeded, rechargedAt: rechargedAt,
};

// H4: per-sender quotas, checked at intake inside the transaction that
// creates the record. The write pool has one connection, so transactions run
// one at a time and a burst of parallel uploads cannot slip past a count.
//
// Settings ([quotas] in the sidecar's settings, passed as environment):
//   uploads_per_hour     recordings accepted from one sender in any hour
//   waiting              recordings not yet finished at once (halted ones excluded)
//   audio_hours_per_day  hours of audio (measured at normalize) in any 24 hours
// 0 turns a quota off.
const respond = require(`${__hooks}/lib/respond.js`);
// PocketBase's stored datetime form, which sorts and compares as text.
const dbTime = require(`${__hooks}/lib/queue.js`).dbTime;

const HOUR_MS = 3600 * 1000;
const DAY_MS = 24 * HOUR_MS;
// A waiting recording frees its place when it finishes: no clock says when.
const WAITING_RETRY_S = 60;

function limits() {
  return {
    uploadsPerHour: respond.envInt("TRANSCRIBER_QUOTAS__UPLOADS_PER_HOUR", 60),
    waiting: respond.envInt("TRANSCRIBER_QUOTAS__WAITING", 20),
    audioMsPerDay: respond.envInt("TRANSCRIBER_QUOTAS__AUDIO_SECONDS_PER_DAY", 24 * 3600) * 1000,
  };
}

// When an upload made at `createdText` leaves a window of `windowMs`: at most
// the window (a record stamped a moment after `now` was read is not later).
function secondsUntil(createdText, windowMs, now) {
  const created = Date.parse(String(createdText).replace(" ", "T"));
  return Math.min(windowMs / 1000, Math.max(1, Math.ceil((created + windowMs - now) / 1000)));
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

// null when the sender may upload; otherwise {code, message, retryAfter}.
function exceeded(tx, owner, now) {
  const q = limits();
  if (q.uploadsPerHour > 0) {
    const recent = tx.findRecordsByFilter("audio_records", "owner = {:owner} && created >= {:since}", "created",
      q.uploadsPerHour, 0, { owner: owner, since: dbTime(now - HOUR_MS) });
    if (recent.length >= q.uploadsPerHour) {
      return {
        code: "too_many_uploads",
        message: "You have sent " + plural(q.uploadsPerHour, "recording") + " in the last hour, the most allowed; " +
          "try again later.",
        retryAfter: secondsUntil(recent[0].getString("created"), HOUR_MS, now),
      };
    }
  }
  if (q.waiting > 0) {
    const row = new DynamicModel({ n: 0 });
    tx.db().newQuery("SELECT COUNT(*) AS n FROM audio_records WHERE owner = {:owner} AND state != 'done' " +
      "AND halted_at = ''").bind({ owner: owner }).one(row);
    if (row.n >= q.waiting) {
      return {
        code: "too_many_waiting",
        message: "You have " + plural(row.n, "recording") + " still being transcribed, the most allowed at once; " +
          "upload more when some have finished.",
        retryAfter: WAITING_RETRY_S,
      };
    }
  }
  if (q.audioMsPerDay > 0) {
    // A recording's length is known once normalized: the end of its last piece.
    const rows = arrayOf(new DynamicModel({ created: "", ms: 0 }));
    tx.db().newQuery("SELECT r.created AS created, COALESCE((SELECT MAX(f.offset_ms + f.duration_ms) FROM files f " +
      "WHERE f.record = r.id AND f.role = 'normalized'), 0) AS ms FROM audio_records r " +
      "WHERE r.owner = {:owner} AND r.created >= {:since} ORDER BY r.created").bind(
      { owner: owner, since: dbTime(now - DAY_MS) }).all(rows);
    let total = 0;
    for (const r of rows) total += r.ms;
    if (total >= q.audioMsPerDay) {
      // Space returns as the oldest recordings leave the 24-hour window.
      let freed = 0;
      let wait = 1;
      for (const r of rows) {
        freed += r.ms;
        wait = secondsUntil(r.created, DAY_MS, now);
        if (total - freed < q.audioMsPerDay) break;
      }
      return {
        code: "too_much_audio",
        message: "You have sent " + spell(total) + " of audio in the last 24 hours; the limit is " +
          spell(q.audioMsPerDay) + ".",
        retryAfter: wait,
      };
    }
  }
  return null;
}

function refuse(e, over) {
  e.response.header().set("Retry-After", String(over.retryAfter));
  return respond.fail(e, 429, over.code, over.message);
}

module.exports = { exceeded: exceeded, refuse: refuse };

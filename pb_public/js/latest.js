// What the page shows of each recording is the newest it heard of.
//
// Realtime events can arrive out of order (PocketBase hands each to the stream
// on its own): every event carries its row's `seq`, and one older than the
// newest heard for its recording is dropped. A read (the list, one recording)
// that began before an event arrived may answer with what preceded it, so what
// it answers gives way to an event heard since the read began.
export function createLatest() {
  let tick = 0;
  const heard = new Map(); // recording id -> {seq, poll, at}

  return {
    // An event for recording `poll.id` numbered `seq`: true when it is the newest heard (show it).
    hear(poll, seq) {
      if (!poll || !poll.id) return false;
      const last = heard.get(poll.id);
      if (last && typeof seq === "number" && seq <= last.seq) return false;
      heard.set(poll.id, { seq: typeof seq === "number" ? seq : 0, poll: poll, at: ++tick });
      return true;
    },
    // A read begins: pass what this returns to `settle` with its answer.
    begin() {
      return tick;
    },
    // What to show of `poll`, read by a request that began at `mark`: an event heard since wins.
    settle(poll, mark) {
      const last = heard.get(poll.id);
      return last && last.at > mark ? last.poll : poll;
    },
    // `ask()`'s answer (a promise of one recording's poll), giving way to an event heard meanwhile.
    async read(ask) {
      const mark = tick;
      return this.settle(await ask(), mark);
    },
    // After a break in the stream: numbering may have started again (a restored backup).
    forget() {
      heard.clear();
    },
  };
}

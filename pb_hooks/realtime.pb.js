/// <reference path="../pb_data/types.d.ts" />
// A heartbeat on every realtime stream (O11). PocketBase sends nothing on an
// idle stream, so a client could not tell a quiet stream from a dead one; with
// a message every minute, the sidecar puts a read timeout on its stream and
// reconnects when the heartbeat stops. (Each message also resets PocketBase's
// own five-minute idle close.)
cronAdd("transcriber_realtime_heartbeat", "* * * * *", () => {
  const clients = $app.subscriptionsBroker().clients();
  for (const id in clients) {
    clients[id].send(new SubscriptionMessage({ name: "PB_PING", data: "{}" }));
  }
});

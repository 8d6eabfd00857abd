// A password forgotten (#/forgot: a reset mail asked for), reset (#/reset/{token}: the mail's link)
// and changed (#/password, signed in).
import * as api from "./api.js";
import { busy, h, toast } from "./dom.js";
import { t } from "./i18n.js";
import {
  handleRefusal, loadOptions, main, passwordLength, refusalWords, restartLive, route, signOut, signedIn, state,
} from "./shell.js";

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

export function renderForgot() {
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

export function renderReset(token) {
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

export function renderPassword() {
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

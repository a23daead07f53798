// The change page: a line number or a symbol of the diff fills the comment form, and a decision
// form signs for one version only, so the moment another version waits or the change leaves
// review (the live part #part-state says which), its forms are disabled with the reason, keeping
// what the reviewer typed.
"use strict";
(function () {
  document.addEventListener("click", (ev) => {
    const pick = ev.target.closest("section.file[data-path] a[data-line], section.file[data-path] a[data-symbol]");
    const form = document.getElementById("comment");
    if (!pick || !form) return;
    ev.preventDefault();
    form.querySelector("[name=path]").value = pick.closest("section.file").dataset.path;
    form.querySelector("[name=line]").value = pick.dataset.line || "";
    form.querySelector("[name=symbol]").value = pick.dataset.symbol || "";
    form.querySelector("[name=text]").focus();
  });

  function staleness() {
    const decide = document.querySelector("section.decide[data-target-seq]");
    const state = document.querySelector("#part-state [data-state]");
    if (!decide || !state) return;
    const pending = state.dataset.pendingSeq;
    if (pending === decide.dataset.targetSeq) return;
    const why = pending
      ? `Version ${state.dataset.version} arrived (entry #${pending}): these forms were for version ${decide.dataset.version}. Reload to review the new version.`
      : `The change left review: it is ${state.dataset.status} now. These forms can no longer be signed.`;
    const banner = decide.querySelector(".stale");
    banner.textContent = why;
    banner.hidden = false;
    decide.querySelectorAll("fieldset").forEach((f) => { f.disabled = true; });
    decide.dataset.stale = "true";
  }

  document.addEventListener("lonca:parts", staleness);
  document.addEventListener("DOMContentLoaded", staleness);
})();

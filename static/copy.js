// Copy buttons: <button data-copy="#id"> puts that element's text on the clipboard, so a command
// or a token shown once is taken whole (no selection by hand, no character missed).
"use strict";
document.addEventListener("click", (ev) => {
  const button = ev.target.closest("button[data-copy]");
  if (!button) return;
  const source = document.querySelector(button.dataset.copy);
  if (!source) return;
  navigator.clipboard.writeText(source.textContent.trim()).then(
    () => { button.textContent = "Copied"; },
    () => { button.textContent = "Select and copy it by hand"; });
});

// The ".ipynb" buttons of the page header (see _ext/xorlib_book.py) save the executed notebook
// instead of opening its JSON in a new tab.
document.addEventListener("DOMContentLoaded", () => {
  for (const link of document.querySelectorAll("a.btn-download-ipynb-button, a.btn-download-notebook-button")) {
    link.setAttribute("download", link.getAttribute("href").split("/").pop());
    link.removeAttribute("target");
  }
});

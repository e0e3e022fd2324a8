// A wrapped code line goes on four columns in from its own indentation, not from the margin,
// so a continuation never looks like a statement of its own (extra.css gives the four alone).
function hangCodeLines() {
  for (const line of document.querySelectorAll('.md-typeset pre > code > span[id^="__span-"]')) {
    const hang = line.textContent.match(/^ */)[0].length + 4;
    line.style.paddingLeft = `${hang}ch`;
    line.style.textIndent = `-${hang}ch`;
  }
}

if (typeof document$ !== "undefined") {
  document$.subscribe(hangCodeLines);  // mkdocs-material's page-loaded stream
} else {
  document.addEventListener("DOMContentLoaded", hangCodeLines);
}

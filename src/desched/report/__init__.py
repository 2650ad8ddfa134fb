"""A simulation's report: text and JSON (`render`), the HTML page (`html`). The live run's
/cycles page renders the same."""

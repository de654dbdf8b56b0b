"""Output formats for CI systems, beside ``exportlens.report``'s text and JSON:
``sarif`` (SARIF 2.1.0, for code scanning) and ``github`` (GitHub Actions workflow
commands, for pull-request annotations). Both place diagnostics by character, so
``columns`` turns the results' UTF-8 byte columns into code points. Torch-free."""

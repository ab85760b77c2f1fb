"""WhatWorkedBench as an Inspect AI task: wwref's episodes served to a model over MCP (see inspect/README.md)."""

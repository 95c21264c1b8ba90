from bowmap.cli import entry

entry()

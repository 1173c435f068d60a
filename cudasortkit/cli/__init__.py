"""The command line: python -m cudasortkit {info,list,demo,bench,tune}."""

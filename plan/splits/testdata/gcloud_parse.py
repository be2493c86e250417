"""Reads a splits file with gcloud's own parser and prints each point's
key parts as JSON, one point a line (for format_test.go).

Usage: python3 gcloud_parse.py SDK_ROOT FILE
"""
import json
import sys

sys.path.insert(0, sys.argv[1] + '/lib')
sys.path.insert(0, sys.argv[1] + '/lib/third_party')

from apitools.base.py import encoding  # noqa: E402
from googlecloudsdk.command_lib.spanner import split_file_parser  # noqa: E402

for point in split_file_parser.SplitFileParser(sys.argv[2], None).Process():
    print(json.dumps(encoding.MessageToPyValue(point), sort_keys=True))

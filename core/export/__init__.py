"""One export job, inside the job process: load the file, find its targets, export
each, analyse failures, find mutations, extract the signature with source lines."""

"""Pure symbol engine (`lonca.symbols`): source bytes to symbol tables, two trees to facts."""

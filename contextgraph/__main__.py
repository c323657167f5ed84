from contextgraph.cli import main

main()

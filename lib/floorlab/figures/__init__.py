"""Figures wing: the book's figures, one module per figure, each drawn from live or stored data."""
from floorlab.figures.bars import stacked_bar
from floorlab.figures.fusion import fusion_schematic
from floorlab.figures.gallery import gallery_bars, gallery_scatter
from floorlab.figures.gemvs import gemv_sizes
from floorlab.figures.pdl import pdl_schematic
from floorlab.figures.roofline import roofline_plot
from floorlab.figures.sizes import scaling
from floorlab.figures.timelines import timeline

__all__ = ["fusion_schematic", "gallery_bars", "gallery_scatter", "gemv_sizes", "pdl_schematic", "roofline_plot",
           "scaling", "stacked_bar", "timeline"]
